/* SPDX-License-Identifier: MIT */
/*
 * Symbols of one process image through libdwfl; see ptw_symbols.h: its
 * modules, the build-id cache, name lookup, a module's functions, address
 * to location, one file before any process maps it.
 */
#define _GNU_SOURCE
#include "symbols_int.h"

/* ---- a process's modules ---- */

static const char *intern(struct ptw_symbols *s, const char *str)
{
	if (!str)
		return NULL;
	if (s->nstrings == s->strings_cap) {
		s->strings_cap = s->strings_cap ? s->strings_cap * 2 : 64;
		s->strings = xreallocarray(s->strings, s->strings_cap, sizeof(*s->strings));
	}
	char *copy = xstrdup(str);
	s->strings[s->nstrings++] = copy;
	return copy;
}

/* loc's symbol from its linkage name: demangled for people, the mangled
 * name kept beside it. */
static void set_symbol(struct ptw_symbols *s, struct ptw_location *loc, const char *name)
{
	char *d = ptw_demangle(name);
	loc->symbol = intern(s, d ? d : name);
	loc->linkage_name = d ? intern(s, name) : NULL;
	free(d);
}

static void free_lookups(struct ptw_symbols *s)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&s->lookups, &it, NULL, &v)) {
		for (struct lookup_result *res = v, *next; res; res = next) {
			next = res->next;
			free(res->key);
			free(res);
		}
	}
	ptw_map_free(&s->lookups);
}

static void free_indexes(struct ptw_symbols *s)
{
	for (size_t i = 0; i < s->nmods; i++) {
		ptw_map_free(&s->mods[i].names);
		free(s->mods[i].entries);
	}
	free(s->mods);
	s->mods = NULL;
	s->nmods = 0;
	free_lookups(s);
}

static int collect_module(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
			  void *arg)
{
	(void)userdata, (void)start;
	struct ptw_symbols *s = arg;
	s->mods = xreallocarray(s->mods, s->nmods + 1, sizeof(*s->mods));
	struct module_index *mi = &s->mods[s->nmods++];
	memset(mi, 0, sizeof(*mi));
	mi->mod = mod;
	mi->path = name;
	mi->is_exe = s->exe_path && name && !strcmp(name, s->exe_path);
	return DWARF_CB_OK;
}

static int report_modules(struct ptw_symbols *s)
{
	if (s->offline)
		return 0; /* its one file does not change */
	free_indexes(s);
	dwfl_report_begin(s->dwfl);
	int r = s->use_list ? sym_report_listed(s) : dwfl_linux_proc_report(s->dwfl, s->pid);
	if (dwfl_report_end(s->dwfl, NULL, NULL) != 0 && r == 0)
		r = EIO;
	if (r != 0)
		return r > 0 ? -r : -EIO;
	dwfl_getmodules(s->dwfl, collect_module, s, 0);
	if (s->use_debug_files && ptw_debugfile_servers())
		for (size_t i = 0; i < s->nmods; i++)
			ptw_debugfile_prefetch(s->mods[i].mod, s->mods[i].path);
	/* The executable first: lookups prefer it, as the dynamic linker does. */
	for (size_t i = 1; i < s->nmods; i++)
		if (s->mods[i].is_exe) {
			struct module_index tmp = s->mods[i];
			memmove(&s->mods[1], &s->mods[0], i * sizeof(*s->mods));
			s->mods[0] = tmp;
			break;
		}
	return 0;
}

/* A new, empty view of process pid's modules, found by find_elf. */
struct ptw_symbols *sym_symbols_alloc(pid_t pid, bool use_debug_files, const char *cache_dir,
					 ptw_memread_fn read, void *read_ctx,
					 __typeof__(((Dwfl_Callbacks *)0)->find_elf) find_elf)
{
	struct ptw_symbols *s = xcalloc(1, sizeof(*s));
	s->pid = pid;
	s->use_debug_files = use_debug_files;
	s->cache_dir = cache_dir ? xstrdup(cache_dir) : NULL;
	s->read = read;
	s->read_ctx = read_ctx;
	s->callbacks.find_elf = find_elf;
	s->callbacks.find_debuginfo = use_debug_files ? ptw_debugfile_find : ptw_debugfile_none;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	return s;
}

int ptw_symbols_new(pid_t pid, bool use_debug_files, const char *cache_dir, ptw_memread_fn read,
		    void *read_ctx, struct ptw_symbols **ret)
{
	struct ptw_symbols *s = sym_symbols_alloc(pid, use_debug_files, cache_dir, read, read_ctx,
					      dwfl_linux_proc_find_elf);

	char path[64], exe[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		s->exe_path = xstrdup(exe);
	}
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		ptw_symbols_free(s);
		return -ENOMEM;
	}
	int r = report_modules(s);
	if (r < 0) {
		ptw_symbols_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void ptw_symbols_free(struct ptw_symbols *s)
{
	if (!s)
		return;
	free_indexes(s);
	for (size_t i = 0; i < s->nall; i++)
		free(s->all_locations[i]);
	free(s->all_locations);
	ptw_map_free(&s->locations);
	for (size_t i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	ptw_symbols_save_cache(s);
	for (size_t i = 0; i < s->ncaches; i++)
		ptw_cache_free(s->caches[i].cache);
	free(s->caches);
	free(s->cache_dir);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	free(s->exe_path);
	for (size_t i = 0; i < s->nlisted; i++)
		free(s->listed[i].path);
	free(s->listed);
	free(s);
}

void ptw_symbols_retire(struct ptw_symbols *s)
{
	if (!s)
		return;
	ptw_symbols_save_cache(s);
	free_indexes(s);
	ptw_map_free(&s->locations);
	for (size_t i = 0; i < s->ncaches; i++)
		ptw_cache_free(s->caches[i].cache);
	free(s->caches);
	s->caches = NULL;
	s->ncaches = 0;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	s->dwfl = NULL;
}

size_t ptw_symbols_forget_cache(struct ptw_symbols *s)
{
	size_t used = s->answers_from_disk;
	if (!used)
		return 0; /* nothing came from a file: the modules said it all */
	s->answers_from_disk = 0;
	for (size_t i = 0; i < s->ncaches; i++) {
		struct ptw_cache *c = s->caches[i].cache;
		size_t k = ptw_cache_count(c);
		if (!k)
			continue;
		ptw_dbg(PTW_DBG_SYM, "cache %s: %zu records forgotten (a cached answer does not fit "
				     "the process)",
			ptw_cache_path(c), k);
		ptw_cache_clear(c);
	}
	/* What was answered from them is asked again. */
	free_lookups(s);
	return used;
}

void ptw_symbols_save_cache(struct ptw_symbols *s)
{
	for (size_t i = 0; i < s->ncaches && !s->cache_unwritable; i++) {
		int r = ptw_cache_save(s->caches[i].cache);
		if (r < 0) {
			/* Not an error: the next start is just not faster. Once. */
			ptw_dbg(PTW_DBG_SYM, "cache not written to %s: %s", s->cache_dir,
				strerror(-r));
			s->cache_unwritable = true;
		}
	}
}

int ptw_symbols_refresh(struct ptw_symbols *s)
{
	int r = report_modules(s);
	/* Addresses may now belong to other modules (dlclose + dlopen). Interned
	 * locations stay valid for spans that already point at them. */
	ptw_map_free(&s->locations);
	return r;
}

/* ---- the build-id cache ---- */

/*
 * What could have changed the answers of a module with this build-id
 * without changing the module: a debug file installed or removed (the
 * build-id path, beside the file, its debuglink's; debuginfod's client
 * cache), debuginfod turned on or off. Cached answers are only good while
 * this stays the same. A few stat()s.
 */
static uint64_t debug_state(const char *hex, Elf *elf, const char *path)
{
	uint64_t bits = 0;
	GElf_Word crc;
	if (ptw_debugfile_here(hex, path, dwelf_elf_gnu_debuglink(elf, &crc)))
		bits |= 1;
	/* A file there, not libdebuginfod's empty record of a miss: a miss
	 * can turn into a file later (it expires), and answers cached
	 * without the file must not outlive that. */
	char *fetched = ptw_debugfile_fetched(hex);
	if (fetched)
		bits |= 2;
	free(fetched);
	if (ptw_debugfile_servers())
		bits |= 4;
	return bits;
}

/* The module's cache (opened once per build-id and session), or NULL. */
struct ptw_cache *sym_module_cache(struct ptw_symbols *s, struct module_index *mi)
{
	if (mi->cache_looked)
		return mi->cache;
	mi->cache_looked = true;
	Dwarf_Addr bias;
	const unsigned char *id;
	GElf_Addr vaddr;
	Elf *elf;
	size_t size = 0;
	if (!s->cache_dir || !(elf = dwfl_module_getelf(mi->mod, &bias)) || !elf_rawfile(elf, &size))
		return NULL;
	int len = dwfl_module_build_id(mi->mod, &id, &vaddr);
	if (len <= 0 || len > 64)
		return NULL;
	mi->bias = bias;
	char hex[129];
	for (int i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	char name[160];
	snprintf(name, sizeof(name), "%s/%zu", hex, size);
	uint64_t key = ptw_str_hash(name);
	for (size_t i = 0; i < s->ncaches; i++)
		if (s->caches[i].key == key)
			return mi->cache = s->caches[i].cache;
	struct ptw_cache *c;
	enum ptw_cache_state state;
	if (ptw_cache_open(s->cache_dir, id, (size_t)len, size, s->use_debug_files ? "debug" : "nodebug",
			   &c, &state) < 0)
		return NULL;
	if (s->use_debug_files) {
		struct ptw_cache_value v;
		uint64_t now = debug_state(hex, elf, mi->path);
		if (ptw_cache_get(c, "debug-files", &v) == 0 && v.a != now) {
			ptw_dbg(PTW_DBG_SYM, "cache %s: debug files changed, forgotten",
				ptw_cache_path(c));
			ptw_cache_clear(c);
		}
		ptw_cache_put(c, "debug-files", &(struct ptw_cache_value){ .found = true, .a = now });
	}
	ptw_dbg(PTW_DBG_SYM, "cache %s for %s: %s, %zu records", ptw_cache_path(c),
		mi->path ? mi->path : "?",
		state == PTW_CACHE_LOADED    ? "loaded"
		: state == PTW_CACHE_MISSING ? "new"
					     : "invalid (ignored)",
		ptw_cache_count(c));
	s->caches = xreallocarray(s->caches, s->ncaches + 1, sizeof(*s->caches));
	s->caches[s->ncaches++] = (struct sym_module_cache){ key, c };
	return mi->cache = c;
}

/* A cached answer; one read from the file is counted (it may be wrong:
 * ptw_symbols_forget_cache). */
int sym_cache_get(struct ptw_symbols *s, struct ptw_cache *c, const char *kind,
		     const char *what, struct ptw_cache_value *ret)
{
	if (!c)
		return -ENOENT;
	char key[600];
	if ((size_t)snprintf(key, sizeof(key), "%s:%s", kind, what) >= sizeof(key))
		return -ENOENT;
	int r = ptw_cache_get(c, key, ret);
	if (r == 0 && ret->loaded)
		s->answers_from_disk++;
	return r;
}

void sym_cache_put(struct ptw_cache *c, const char *kind, const char *what, bool found,
		      uint64_t a, uint64_t b, const char *text)
{
	if (!c)
		return;
	char key[600];
	if ((size_t)snprintf(key, sizeof(key), "%s:%s", kind, what) >= sizeof(key))
		return;
	ptw_cache_put(c, key, &(struct ptw_cache_value){ found, a, b, text, false });
}

/* ---- name lookup ---- */

static void build_index(struct module_index *mi)
{
	mi->built = true;
	int n = dwfl_module_getsymtab(mi->mod);
	if (n <= 0)
		return;
	mi->entries = xcalloc((size_t)n, sizeof(*mi->entries));
	for (int i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(mi->mod, i, &sym, &addr, NULL, NULL, NULL);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF)
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC &&
		    type != STT_NOTYPE)
			continue;
		struct sym_entry *e = &mi->entries[i];
		const char *at = strchr(name, '@');
		e->name = name;
		e->name_len = at ? (size_t)(at - name) : strlen(name);
		e->addr = addr;
		e->size = sym.st_size;
		bool global = GELF_ST_BIND(sym.st_info) != STB_LOCAL;
		/* .symtab keeps versions in names: "@@" marks the default one. */
		e->rank = !global ? 0 : !at ? 2 : at[1] == '@' ? 3 : 1;
		char base[256];
		if (e->name_len >= sizeof(base))
			continue;
		memcpy(base, name, e->name_len);
		base[e->name_len] = '\0';
		uint64_t h = ptw_str_hash(base);
		e->next = ptw_map_get(&mi->names, h);
		ptw_map_put(&mi->names, h, e);
	}
}

bool sym_module_matches(const struct module_index *mi, const char *module)
{
	if (module == PTW_MOD_ANY)
		return true;
	if (!strcmp(module, PTW_MOD_EXE))
		return mi->is_exe;
	if (!mi->path)
		return false;
	const char *base = strrchr(mi->path, '/');
	base = base ? base + 1 : mi->path;
	return !strncmp(base, module, strlen(module));
}

static const struct sym_entry *find_in_module(struct module_index *mi, const char *name)
{
	if (!mi->built)
		build_index(mi);
	const struct sym_entry *best = NULL;
	size_t len = strlen(name);
	for (const struct sym_entry *e = ptw_map_get(&mi->names, ptw_str_hash(name)); e; e = e->next) {
		if (e->name_len != len || strncmp(e->name, name, len))
			continue;
		if (!best || e->rank > best->rank)
			best = e;
	}
	return best;
}

int ptw_symbols_lookup(struct ptw_symbols *s, const char *module, const char *name,
		       uint64_t *ret_addr, uint64_t *ret_size)
{
	struct ptw_buf key = { 0 };
	ptw_buf_puts(&key, module ? module : "*");
	ptw_buf_putc(&key, '\001');
	ptw_buf_puts(&key, name);
	uint64_t h = ptw_str_hash(key.p);

	struct lookup_result *head = ptw_map_get(&s->lookups, h), *res;
	for (res = head; res; res = res->next)
		if (!strcmp(res->key, key.p))
			break;
	if (!res) {
		res = xcalloc(1, sizeof(*res));
		res->key = key.p;
		key.p = NULL;
		for (size_t i = 0; i < s->nmods && !res->found; i++) {
			struct module_index *mi = &s->mods[i];
			if (!sym_module_matches(mi, module))
				continue;
			struct ptw_cache *c = sym_module_cache(s, mi);
			struct ptw_cache_value v;
			if (sym_cache_get(s, c, "sym", name, &v) == 0) {
				res->found = v.found;
				res->addr = mi->bias + v.a;
				res->size = v.b;
				continue;
			}
			const struct sym_entry *e = find_in_module(mi, name);
			if (e) {
				res->found = true;
				res->addr = e->addr;
				res->size = e->size;
			}
			sym_cache_put(c, "sym", name, e != NULL, e ? e->addr - mi->bias : 0, e ? e->size : 0,
				  NULL);
		}
		res->next = head;
		ptw_map_put(&s->lookups, h, res);
		ptw_dbg(PTW_DBG_SYM, "lookup %s in %s: %s %#llx", name, module ? module : "*",
			res->found ? "found" : "missing", (unsigned long long)res->addr);
	}
	ptw_buf_free(&key);
	if (!res->found)
		return -ENOENT;
	*ret_addr = res->addr;
	if (ret_size)
		*ret_size = res->size;
	return 0;
}

/* name in the symbol tables of the file itself (.symtab, else .dynsym). */
static bool find_in_elf(Elf *elf, GElf_Addr bias, const char *name, uint64_t *ret_addr,
			uint64_t *ret_size)
{
	for (int want = SHT_SYMTAB; want; want = want == SHT_SYMTAB ? SHT_DYNSYM : 0) {
		for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != (GElf_Word)want || !sh.sh_entsize)
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			size_t n = d ? d->d_size / sh.sh_entsize : 0;
			for (size_t i = 0; i < n; i++) {
				GElf_Sym sym;
				const char *sname;
				if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
				    !(sname = elf_strptr(elf, sh.sh_link, sym.st_name)) || strcmp(sname, name))
					continue;
				*ret_addr = bias + sym.st_value;
				*ret_size = sym.st_size;
				return true;
			}
		}
	}
	return false;
}

int ptw_symbols_lookup_loaded(struct ptw_symbols *s, const char *module, const char *name,
			      uint64_t *ret_addr)
{
	for (size_t i = 0; i < s->nmods; i++) {
		struct module_index *mi = &s->mods[i];
		if (!sym_module_matches(mi, module))
			continue;
		struct ptw_cache *c = sym_module_cache(s, mi);
		struct ptw_cache_value v;
		uint64_t addr = 0, size = 0;
		bool found;
		if (sym_cache_get(s, c, "sym", name, &v) == 0 || sym_cache_get(s, c, "esym", name, &v) == 0) {
			found = v.found;
			addr = found ? mi->bias + v.a : 0;
		} else {
			Dwarf_Addr bias;
			Elf *elf = dwfl_module_getelf(mi->mod, &bias);
			found = elf && find_in_elf(elf, bias, name, &addr, &size);
			sym_cache_put(c, "esym", name, found, found ? addr - mi->bias : 0, size, NULL);
		}
		ptw_dbg(PTW_DBG_SYM, "lookup %s in the file %s: %s %#llx", name,
			mi->path ? mi->path : "?", found ? "found" : "missing", (unsigned long long)addr);
		if (found) {
			*ret_addr = addr;
			return 0;
		}
	}
	return -ENOENT;
}

/* mod if it holds code at addr: libdwfl's dwfl_addrmodule answers the
 * last module for an address past every module (0x4141414141414141 was
 * "in" ld.so, at offset 0x4140c1beddaf2141), and a module of a file that
 * is no ELF (/etc/ld.so.cache, a locale file, mapped while the list was
 * read and maybe gone since: a JIT page now there was "in" ld.so.cache)
 * holds no code to name. */
static Dwfl_Module *holding_module(Dwfl_Module *mod, uint64_t addr)
{
	Dwarf_Addr lo, hi, bias;
	if (!mod || !dwfl_module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL) || addr < lo ||
	    addr >= hi || !dwfl_module_getelf(mod, &bias))
		return NULL;
	return mod;
}

/* The module that holds code at addr, else NULL. */
Dwfl_Module *sym_module_at(struct ptw_symbols *s, uint64_t addr)
{
	return holding_module(dwfl_addrmodule(s->dwfl, addr), addr);
}

struct module_index *sym_index_of(struct ptw_symbols *s, Dwfl_Module *mod)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].mod == mod)
			return &s->mods[i];
	return NULL;
}

const char *ptw_symbols_exe(const struct ptw_symbols *s)
{
	return s->exe_path;
}

const char *ptw_symbols_module_of(struct ptw_symbols *s, uint64_t addr)
{
	Dwfl_Module *mod = sym_module_at(s, addr);
	struct module_index *mi = mod ? sym_index_of(s, mod) : NULL;
	return mi ? mi->path : NULL;
}

const char *ptw_symbols_module_path(struct ptw_symbols *s, const char *module)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (sym_module_matches(&s->mods[i], module))
			return s->mods[i].path;
	return NULL;
}

/* ---- every function of a module (--trace) ---- */

size_t ptw_symbols_module_count(const struct ptw_symbols *s)
{
	return s->nmods;
}

int ptw_symbols_module_info(struct ptw_symbols *s, size_t i, const char **ret_path,
			    uint64_t *ret_start, bool *ret_is_exe)
{
	if (i >= s->nmods)
		return -ENOENT;
	Dwarf_Addr start = 0;
	dwfl_module_info(s->mods[i].mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	*ret_path = s->mods[i].path;
	*ret_start = start;
	*ret_is_exe = s->mods[i].is_exe;
	return 0;
}

static bool has_symtab(Elf *elf)
{
	for (Elf_Scn *scn = NULL; elf && (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return true;
	}
	return false;
}

int ptw_symbols_next_symbol(struct ptw_symbols *s, uint64_t addr, uint64_t *ret)
{
	Dwfl_Module *mod = sym_module_at(s, addr);
	int n = mod ? dwfl_module_getsymtab(mod) : -1;
	GElf_Word section = SHN_UNDEF;
	uint64_t best = UINT64_MAX;
	for (int k = 0; k < n && section == SHN_UNDEF; k++) {
		GElf_Sym sym;
		GElf_Addr a, bias;
		GElf_Word shndx;
		Elf *elf;
		GElf_Shdr sh;
		if (!dwfl_module_getsym_info(mod, k, &sym, &a, &shndx, &elf, &bias) || a != addr ||
		    shndx == SHN_UNDEF || shndx == SHN_ABS)
			continue;
		section = shndx;
		/* the section's end, if no symbol comes after it there */
		Elf_Scn *scn = elf ? elf_getscn(elf, shndx) : NULL;
		if (scn && gelf_getshdr(scn, &sh) && sh.sh_addr + sh.sh_size + bias > addr)
			best = sh.sh_addr + sh.sh_size + bias;
	}
	for (int k = 0; k < n && section != SHN_UNDEF; k++) {
		GElf_Sym sym;
		GElf_Addr a;
		GElf_Word shndx;
		if (dwfl_module_getsym_info(mod, k, &sym, &a, &shndx, NULL, NULL) && shndx == section &&
		    a > addr && a < best)
			best = a;
	}
	if (best == UINT64_MAX)
		return -ENOENT;
	*ret = best;
	return 0;
}

int ptw_symbols_module_functions(struct ptw_symbols *s, size_t i, ptw_function_fn fn, void *ctx)
{
	if (i >= s->nmods)
		return -ENOENT;
	Dwfl_Module *mod = s->mods[i].mod;
	int n = dwfl_module_getsymtab(mod);
	if (n < 0)
		return -ENOENT;
	for (int k = 0; k < n; k++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(mod, k, &sym, &addr, NULL, NULL, NULL);
		/* IFUNC symbols name their resolver, not the code that runs. */
		if (!name || !*name || sym.st_shndx == SHN_UNDEF || !addr ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC)
			continue;
		char buf[512];
		const char *at = strchr(name, '@');
		if (at) {
			size_t len = (size_t)(at - name);
			if (len >= sizeof(buf))
				continue;
			memcpy(buf, name, len);
			buf[len] = '\0';
			name = buf;
		}
		fn(ctx, addr, name);
	}
	/* What was searched: a symbol table (in the file or a debug file), or
	 * only what the dynamic linker needs (.dynsym: no static functions). */
	Dwarf_Addr bias;
	const char *debugfile = NULL;
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, &debugfile);
	return has_symtab(dwfl_module_getelf(mod, &bias)) || debugfile ? 1 : 0;
}

/* ---- address -> location ---- */

/* Whether a CU's ranges hold a module-relative address: 1 yes, 0 no, -1 the
 * CU does not say (no DW_AT_low_pc/high_pc, no DW_AT_ranges). */
static int cu_holds(Dwarf_Die *cu, Dwarf_Addr a)
{
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	int r = -1;
	while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
		if (a >= lo && a < hi)
			return 1;
		r = 0;
	}
	return r;
}

/*
 * The line table row for addr, or NULL; func_lo is where the function
 * holding addr begins (0 if not known).
 *
 * Not dwfl_module_getsrc: libdwfl finds the CU through .debug_aranges as if
 * each arange ran on to the next one, and Go's compiler writes no aranges
 * for its CUs, so in a cgo program every Go address lands in the C CU
 * before it (runtime/cgo/gcc_mmap.c, whose last sequence ends in an empty
 * row, line 37, that libdw then gives for any address beyond it; binutils
 * addr2line and gdb read the CUs' own ranges and are right). Hence the CU
 * is checked against its own ranges, and looked for among all CUs when it
 * does not hold addr; and a row that begins before the function holding
 * addr is some other code's line: none is better than a wrong one. (An
 * address below the first arange or above the last, as Go code below the
 * first C function of a cgo program, gets no line, as before; a module
 * without aranges is searched.)
 */
static Dwarf_Line *source_line(Dwfl_Module *mod, uint64_t addr, uint64_t func_lo)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
	if (!cu) {
		/* Outside every arange (libdwfl checked that), or no aranges
		 * at all (Go without cgo, clang without -gdwarf-aranges). */
		Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
		Dwarf_Aranges *ar;
		size_t n = 0;
		if (!dw || (dwarf_getaranges(dw, &ar, &n) == 0 && n > 0))
			return NULL;
	}
	if (!cu || cu_holds(cu, addr - bias) == 0) {
		/* The first search walks every CU (libc's 2,000: 25-45 ms
		 * here, 1 ms after that), and only addresses in the gaps
		 * between aranges, or of modules without, come here. */
		Dwarf_Die *c = NULL;
		cu = NULL;
		while ((c = dwfl_module_nextcu(mod, c, &bias)) != NULL)
			if (cu_holds(c, addr - bias) == 1) {
				cu = c;
				break;
			}
		if (!cu)
			return NULL;
	}
	Dwarf_Line *line = dwarf_getsrc_die(cu, addr - bias);
	Dwarf_Addr at;
	if (!line || dwarf_lineaddr(line, &at) != 0 || at + bias > addr ||
	    (func_lo && at + bias < func_lo))
		return NULL;
	return line;
}

const struct ptw_location *ptw_symbols_locate(struct ptw_symbols *s, uint64_t addr)
{
	struct ptw_location *loc = ptw_map_get(&s->locations, addr);
	if (loc)
		return loc;
	Dwfl_Module *mod = sym_module_at(s, addr);
	if (!mod && ptw_symbols_refresh(s) == 0) {
		/* A library loaded since we last looked (dlopen without ld.so's
		 * notification, JIT): refresh once; the answer is cached. */
		mod = sym_module_at(s, addr);
	}
	loc = xcalloc(1, sizeof(*loc));
	loc->addr = addr;
	if (s->nall == s->all_cap) {
		s->all_cap = s->all_cap ? s->all_cap * 2 : 64;
		s->all_locations = xreallocarray(s->all_locations, s->all_cap, sizeof(*s->all_locations));
	}
	s->all_locations[s->nall++] = loc;
	if (mod) {
		struct module_index *mi = sym_index_of(s, mod);
		loc->module = mi ? intern(s, mi->path) : NULL;
		struct ptw_cache *c = mi ? sym_module_cache(s, mi) : NULL;
		char key[32];
		struct ptw_cache_value v, src;
		if (c)
			snprintf(key, sizeof(key), "%" PRIx64, addr - mi->bias);
		if (c && sym_cache_get(s, c, "loc", key, &v) == 0) {
			if (v.found && v.text) {
				set_symbol(s, loc, v.text);
				loc->symbol_offset = v.a;
			}
			loc->has_offset = true;
			loc->offset = addr - mi->bias;
			if (sym_cache_get(s, c, "src", key, &src) == 0 && src.text) {
				loc->file = intern(s, src.text);
				loc->line = (int)src.a;
			}
			ptw_map_put(&s->locations, addr, loc);
			return loc;
		}
		GElf_Off off = 0;
		GElf_Sym sym;
		uint64_t func_lo = 0;
		const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
		if (name && GELF_ST_TYPE(sym.st_info) == STT_FUNC)
			func_lo = addr - off;
		if (name) {
			/* Display names: no version (".symtab" of a debug file says
			 * "pthread_cond_wait@@GLIBC_2.3.2") and no "__GI_" (glibc's
			 * hidden internal alias of the same function). */
			if (!strncmp(name, "__GI_", 5))
				name += 5;
			char *plain = xstrdup(name);
			plain[strcspn(plain, "@")] = '\0';
			set_symbol(s, loc, plain);
			free(plain);
			loc->symbol_offset = off;
		}
		Dwarf_Addr bias;
		if (dwfl_module_getelf(mod, &bias)) {
			loc->has_offset = true;
			loc->offset = addr - bias;
		}
		Dwarf_Line *line = source_line(mod, addr, func_lo);
		if (line) {
			int lineno = 0;
			const char *file = dwarf_linesrc(line, NULL, NULL);
			if (file && dwarf_lineno(line, &lineno) == 0) {
				loc->file = intern(s, file);
				loc->line = lineno;
			}
		}
		if (c && loc->file)
			sym_cache_put(c, "src", key, true, (uint64_t)loc->line, 0, loc->file);
		if (c)
			sym_cache_put(c, "loc", key, loc->symbol != NULL, loc->symbol_offset, 0,
				  loc->linkage_name ? loc->linkage_name : loc->symbol);
	}
	ptw_map_put(&s->locations, addr, loc);
	return loc;
}

/*
 * Function extent from .eh_frame_hdr: its search table holds the start of
 * every FDE, sorted; the function containing addr ends where the next
 * starts. Only the universal x86-64 table encoding (datarel sdata4).
 */
static int fde_range(Dwfl_Module *mod, uint64_t addr, uint64_t *ret_lo, uint64_t *ret_hi)
{
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -ENOENT;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name;
		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(name, ".eh_frame_hdr"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		const uint8_t *h = d ? d->d_buf : NULL;
		if (!h || d->d_size < 12 || h[0] != 1 || h[2] != 0x03 /* udata4 */ ||
		    h[3] != 0x3b /* datarel | sdata4 */)
			return -ENOENT;
		uint32_t count;
		memcpy(&count, h + 8, 4); /* after version, 3 encodings, eh_frame_ptr */
		if (12 + (uint64_t)count * 8 > d->d_size)
			return -ENOENT;
		int64_t target = (int64_t)(addr - bias - sh.sh_addr);
		const uint8_t *table = h + 12;
		/* Last entry whose start <= target. */
		int64_t lo = -1, hi = count;
		while (hi - lo > 1) {
			int64_t mid = (lo + hi) / 2;
			int32_t loc;
			memcpy(&loc, table + mid * 8, 4);
			if (loc <= target)
				lo = mid;
			else
				hi = mid;
		}
		if (lo < 0 || lo + 1 >= (int64_t)count)
			return -ENOENT;
		int32_t start, next;
		memcpy(&start, table + lo * 8, 4);
		memcpy(&next, table + (lo + 1) * 8, 4);
		*ret_lo = bias + sh.sh_addr + (uint64_t)(int64_t)start;
		*ret_hi = bias + sh.sh_addr + (uint64_t)(int64_t)next;
		return 0;
	}
	return -ENOENT;
}

int ptw_symbols_function_range(struct ptw_symbols *s, uint64_t addr, uint64_t *ret_lo,
			       uint64_t *ret_hi)
{
	Dwfl_Module *mod = sym_module_at(s, addr);
	if (!mod)
		return -ENOENT;
	struct module_index *mi = sym_index_of(s, mod);
	struct ptw_cache *c = mi ? sym_module_cache(s, mi) : NULL;
	char key[32];
	struct ptw_cache_value v;
	if (c) {
		snprintf(key, sizeof(key), "%" PRIx64, addr - mi->bias);
		if (sym_cache_get(s, c, "range", key, &v) == 0) {
			if (!v.found)
				return -ENOENT;
			*ret_lo = mi->bias + v.a;
			*ret_hi = mi->bias + v.b;
			return 0;
		}
	}
	GElf_Off off = 0;
	GElf_Sym sym;
	uint64_t lo, hi;
	int r = 0;
	const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
	if (name && sym.st_size > 0 && off < sym.st_size) {
		lo = addr - off;
		hi = addr - off + sym.st_size;
	} else {
		r = fde_range(mod, addr, &lo, &hi);
	}
	if (c)
		sym_cache_put(c, "range", key, r == 0, r == 0 ? lo - mi->bias : 0, r == 0 ? hi - mi->bias : 0,
			  NULL);
	if (r == 0) {
		*ret_lo = lo;
		*ret_hi = hi;
	}
	return r;
}

/* ---- one file, before any process maps it ---- */

static int no_memory(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx, (void)addr, (void)buf, (void)len;
	return -EIO;
}

int ptw_symbols_new_file(const char *path, bool use_debug_files, const char *cache_dir,
			 struct ptw_symbols **ret)
{
	struct ptw_symbols *s = xcalloc(1, sizeof(*s));
	s->offline = true;
	s->use_debug_files = use_debug_files;
	s->cache_dir = cache_dir ? xstrdup(cache_dir) : NULL;
	s->read = no_memory;
	s->callbacks.find_elf = dwfl_build_id_find_elf;
	s->callbacks.find_debuginfo = use_debug_files ? ptw_debugfile_find : ptw_debugfile_none;
	s->callbacks.section_address = dwfl_offline_section_address;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	s->exe_path = xstrdup(path);
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		ptw_symbols_free(s);
		return -ENOMEM;
	}
	dwfl_report_begin(s->dwfl);
	Dwfl_Module *m = dwfl_report_offline(s->dwfl, path, path, -1);
	if (dwfl_report_end(s->dwfl, NULL, NULL) != 0 || !m) {
		ptw_symbols_free(s);
		return -ENOEXEC;
	}
	dwfl_getmodules(s->dwfl, collect_module, s, 0);
	*ret = s;
	return 0;
}

int ptw_symbols_file_offset(struct ptw_symbols *s, uint64_t addr, uint64_t *ret_off)
{
	Dwfl_Module *mod = sym_module_at(s, addr);
	GElf_Addr bias;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	size_t n;
	if (!elf || elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	uint64_t vaddr = addr - bias;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
		    vaddr - ph.p_vaddr < ph.p_filesz) {
			*ret_off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

int ptw_symbols_set_listed(struct ptw_symbols *s, const struct ptw_module_spec *mods, size_t n)
{
	if (s->offline)
		return -EINVAL;
	struct listed_module *old = s->listed;
	size_t nold = s->nlisted;
	s->listed = xcalloc(n ? n : 1, sizeof(*s->listed));
	s->nlisted = 0;
	for (size_t i = 0; i < n; i++)
		if (sym_listed_check(&mods[i], &s->listed[s->nlisted])) {
			if (mods[i].is_exe) {
				free(s->exe_path);
				s->exe_path = xstrdup(mods[i].path);
			}
			s->nlisted++;
		}
	s->use_list = true;
	s->callbacks.find_elf = sym_listed_find_elf;
	int r = ptw_symbols_refresh(s);
	for (size_t i = 0; i < nold; i++)
		free(old[i].path);
	free(old);
	return r < 0 ? r : (int)s->nlisted;
}

int ptw_symbols_new_listed(pid_t pid, const struct ptw_module_spec *mods, size_t n,
			   bool use_debug_files, const char *cache_dir, ptw_memread_fn read,
			   void *read_ctx, struct ptw_symbols **ret)
{
	struct ptw_symbols *s =
		sym_symbols_alloc(pid, use_debug_files, cache_dir, read, read_ctx, sym_listed_find_elf);
	s->dwfl = dwfl_begin(&s->callbacks);
	if (!s->dwfl) {
		ptw_symbols_free(s);
		return -ENOMEM;
	}
	int r = ptw_symbols_set_listed(s, mods, n);
	if (r < 0) {
		ptw_symbols_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int ptw_symbols_read_file(struct ptw_symbols *s, uint64_t addr, void *buf, size_t len)
{
	Dwfl_Module *mod = s->dwfl ? sym_module_at(s, addr) : NULL;
	GElf_Addr bias;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	size_t n, size;
	const char *raw = elf ? elf_rawfile(elf, &size) : NULL;
	if (!raw || elf_getphdrnum(elf, &n) < 0)
		return -ENOENT;
	uint64_t vaddr = addr - bias;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || vaddr < ph.p_vaddr ||
		    vaddr - ph.p_vaddr > ph.p_filesz || ph.p_filesz - (vaddr - ph.p_vaddr) < len)
			continue;
		uint64_t off = vaddr - ph.p_vaddr + ph.p_offset;
		if (off > size || size - off < len)
			return -ENOENT;
		memcpy(buf, raw + off, len);
		return 0;
	}
	return -ENOENT;
}
