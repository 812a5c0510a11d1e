/* SPDX-License-Identifier: MIT */
/*
 * A process's modules as the dynamic linker lists them (the kernel path
 * walks ld.so's list in the target), checked and reported instead of
 * /proc/PID/maps.
 */
#define _GNU_SOURCE
#include "symbols_int.h"

/* ---- listed modules ----
 *
 * The modules of a process as its dynamic linker lists them (the kernel
 * path reads the link_map in the target's own context: no read of
 * /proc/PID/maps, which takes the target's memory-map lock while it
 * runs). The list is what the target says: every file is opened without
 * blocking, must be a regular ELF file, and must fit the entry (its
 * dynamic section where the entry says, an aligned bias, a range in user
 * space); an entry that does not is left out. */

/* A FIFO or a device a hostile list names must not block or be read. */
static int open_regular(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

#define USER_SPACE_END (1ull << 57) /* above any x86-64 user address (5-level paging) */

bool sym_listed_check(const struct ptw_module_spec *m, struct listed_module *ret)
{
	struct stat st;
	int fd = m->path ? open_regular(m->path, &st) : -EINVAL;
	if (fd < 0) {
		ptw_dbg(PTW_DBG_SYM, "listed module %s: %s", m->path ? m->path : "?",
			strerror(-fd));
		return false;
	}
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t n;
	uint64_t lo = UINT64_MAX, hi = 0, dyn = 0;
	bool have_dyn = false, ok = elf && elf_kind(elf) == ELF_K_ELF && gelf_getehdr(elf, &eh) &&
				    (eh.e_type == ET_DYN || eh.e_type == ET_EXEC) &&
				    elf_getphdrnum(elf, &n) == 0;
	for (size_t i = 0; ok && i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD) {
			if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
				ok = false;
			lo = ph.p_vaddr < lo ? ph.p_vaddr : lo;
			hi = ph.p_vaddr + ph.p_memsz > hi ? ph.p_vaddr + ph.p_memsz : hi;
		} else if (ph.p_type == PT_DYNAMIC) {
			dyn = ph.p_vaddr;
			have_dyn = true;
		}
	}
	const char *why = ok ? NULL : "not an ELF file it can read";
	uint64_t bias = ok && m->entry ? m->entry - eh.e_entry : m->bias;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = bias + (lo & ~(page - 1)), end = bias + hi;
	if (!why && lo >= hi)
		why = "nothing loaded";
	else if (!why && eh.e_type == ET_EXEC && bias)
		why = "a bias for a file that is not relocatable";
	else if (!why && (bias & (page - 1)))
		why = "a bias not page-aligned";
	else if (!why && (start < bias || end < start || end > USER_SPACE_END))
		why = "a range outside user space";
	else if (!why && m->dynamic && (!have_dyn || bias + dyn != m->dynamic))
		why = "its dynamic section is not where the entry says (another file, or not "
		      "this one's bias)";
	if (elf)
		elf_end(elf);
	close(fd);
	if (why) {
		ptw_dbg(PTW_DBG_SYM, "listed module %s left out: %s", m->path, why);
		return false;
	}
	ret->path = xstrdup(m->path);
	ret->start = start;
	ret->end = (end + page - 1) & ~(page - 1);
	ret->dev = st.st_dev;
	ret->ino = st.st_ino;
	return true;
}

/* libdwfl's find_elf for a listed module: the file checked, if it is
 * still that file. */
int sym_listed_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
			char **file_name, Elf **elfp)
{
	(void)mod, (void)name, (void)base;
	const struct listed_module *lm = *userdata;
	struct stat st;
	int fd = lm ? open_regular(lm->path, &st) : -EINVAL;
	if (fd < 0)
		return -1;
	if (st.st_dev != lm->dev || st.st_ino != lm->ino) {
		close(fd);
		return -1; /* replaced since it was checked */
	}
	*file_name = strdup(lm->path);
	*elfp = NULL;
	return fd;
}

int sym_report_listed(struct ptw_symbols *s)
{
	for (size_t i = 0; i < s->nlisted; i++) {
		struct listed_module *lm = &s->listed[i];
		Dwfl_Module *m = dwfl_report_module(s->dwfl, lm->path, lm->start, lm->end);
		if (!m) {
			ptw_dbg(PTW_DBG_SYM, "listed module %s: %s", lm->path, dwfl_errmsg(-1));
			continue;
		}
		void **ud;
		dwfl_module_info(m, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		*ud = lm;
	}
	return 0;
}
