/* SPDX-License-Identifier: MIT */
/*
 * A struct member's offset from a module's DWARF (struct pthread's, for
 * both backends), cached per build-id.
 */
#define _GNU_SOURCE
#include "symbols_int.h"

/* ---- DWARF struct layout ---- */

static bool name_has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), m = strlen(suffix);
	return n >= m && !strcmp(name + n - m, suffix);
}

/* Looks for member in the struct DIE, descending into anonymous members. */
static bool find_member(Dwarf_Die *type, const char *member, uint64_t base, uint64_t *ret)
{
	Dwarf_Die child;
	if (dwarf_child(type, &child) != 0)
		return false;
	do {
		if (dwarf_tag(&child) != DW_TAG_member)
			continue;
		Dwarf_Attribute attr;
		Dwarf_Word off = 0;
		if (dwarf_attr(&child, DW_AT_data_member_location, &attr))
			dwarf_formudata(&attr, &off);
		const char *name = dwarf_diename(&child);
		if (name && !strcmp(name, member)) {
			*ret = base + off;
			return true;
		}
		if (!name) {
			Dwarf_Die sub;
			if (dwarf_attr(&child, DW_AT_type, &attr) &&
			    dwarf_formref_die(&attr, &sub) &&
			    (dwarf_tag(&sub) == DW_TAG_structure_type ||
			     dwarf_tag(&sub) == DW_TAG_union_type) &&
			    find_member(&sub, member, base + off, ret))
				return true;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

static bool find_struct_in_cu(Dwarf_Die *cudie, const char *struct_name, const char *member,
			      uint64_t *ret)
{
	Dwarf_Die child;
	if (dwarf_child(cudie, &child) != 0)
		return false;
	do {
		if (dwarf_tag(&child) != DW_TAG_structure_type ||
		    dwarf_hasattr(&child, DW_AT_declaration))
			continue;
		const char *name = dwarf_diename(&child);
		if (name && !strcmp(name, struct_name) && find_member(&child, member, 0, ret))
			return true;
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

static int member_in_module(struct module_index *mi, const char *const *cu_hints,
			    const char *struct_name, const char *member, uint64_t *ret_offset)
{
	Dwarf_Addr bias;
	Dwarf *dw = dwfl_module_getdwarf(mi->mod, &bias);
	if (!dw)
		return -ENOENT;
	/* Two passes: the hinted compilation units (cheap), then all. */
	for (int pass = cu_hints ? 0 : 1; pass < 2; pass++) {
		Dwarf_Off off = 0, next;
		size_t hsize;
		while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
			Dwarf_Die cudie;
			if (dwarf_offdie(dw, off + hsize, &cudie)) {
				const char *cuname = dwarf_diename(&cudie);
				bool hinted = false;
				for (const char *const *h = cu_hints; h && *h && cuname; h++)
					if (name_has_suffix(cuname, *h))
						hinted = true;
				if ((pass == 1 || hinted) &&
				    find_struct_in_cu(&cudie, struct_name, member, ret_offset)) {
					ptw_dbg(PTW_DBG_SYM, "struct %s.%s at %#llx (cu %s)",
						struct_name, member,
						(unsigned long long)*ret_offset,
						cuname ? cuname : "?");
					return 0;
				}
			}
			off = next;
		}
	}
	return -ENOENT;
}

int ptw_symbols_member_offset(struct ptw_symbols *s, const char *module,
			      const char *const *cu_hints, const char *struct_name,
			      const char *member, uint64_t *ret_offset)
{
	char what[256];
	snprintf(what, sizeof(what), "%s.%s", struct_name, member);
	for (size_t i = 0; i < s->nmods; i++) {
		struct module_index *mi = &s->mods[i];
		if (!sym_module_matches(mi, module))
			continue;
		struct ptw_cache *c = sym_module_cache(s, mi);
		struct ptw_cache_value v;
		uint64_t off = 0;
		int r;
		if (sym_cache_get(s, c, "member", what, &v) == 0) {
			r = v.found ? 0 : -ENOENT;
			off = v.a;
			ptw_dbg(PTW_DBG_SYM, "struct %s: %s %#llx (cached)", what,
				r == 0 ? "at" : "missing", (unsigned long long)off);
		} else {
			r = member_in_module(mi, cu_hints, struct_name, member, &off);
			sym_cache_put(c, "member", what, r == 0, off, 0, NULL);
		}
		if (r == 0) {
			*ret_offset = off;
			return 0;
		}
	}
	return -ENOENT;
}
