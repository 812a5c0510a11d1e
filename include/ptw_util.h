/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every module: allocation that cannot fail, clocks,
 * a growable byte buffer, a u64-keyed hash map and the --debug log.
 */
#ifndef PTW_UTIL_H
#define PTW_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define PTW_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation failure in the tool is fatal: these print and exit(99). */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A copy of a NULL-terminated argv (NULL: an empty one), each string
 * malloc'd; freed by ptw_argv_free (which takes NULL too). */
char **ptw_argv_dup(char *const *argv);
void ptw_argv_free(char **argv);

/* CLOCK_MONOTONIC in nanoseconds; every timestamp ptwatch reports uses it. */
uint64_t ptw_now_ns(void);
/* Sleeps ms milliseconds (the test-only delays; never to synchronise). */
void ptw_sleep_ms(unsigned ms);
/* CLOCK_REALTIME minus CLOCK_MONOTONIC, sampled now. */
int64_t ptw_realtime_offset_ns(void);

/* Growable byte buffer; p is always NUL-terminated once anything was added. */
struct ptw_buf {
	char *p;
	size_t len, cap;
};
/* Makes room for len more bytes and the NUL after them. */
void ptw_buf_grow(struct ptw_buf *b, size_t len);
/* (inline: the documents and records are written a few bytes at a time) */
static inline void ptw_buf_add(struct ptw_buf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->cap)
		ptw_buf_grow(b, len);
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
}
static inline void ptw_buf_putc(struct ptw_buf *b, char c)
{
	ptw_buf_add(b, &c, 1);
}
void ptw_buf_puts(struct ptw_buf *b, const char *s);
void ptw_buf_printf(struct ptw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ptw_buf_vprintf(struct ptw_buf *b, const char *fmt, va_list ap);
void ptw_buf_reset(struct ptw_buf *b);
void ptw_buf_free(struct ptw_buf *b);

/*
 * Open-addressing hash map from a non-zero u64 key to a pointer.
 * Key 0 and key UINT64_MAX are reserved (empty slot, deleted slot).
 */
struct ptw_map {
	uint64_t *keys;
	void **vals;
	size_t cap, count, used; /* used counts live and deleted slots */
};
void *ptw_map_get(const struct ptw_map *m, uint64_t key);
/* Returns the previous value for key, or NULL. */
void *ptw_map_put(struct ptw_map *m, uint64_t key, void *val);
/* Returns the removed value, or NULL when key was absent. */
void *ptw_map_del(struct ptw_map *m, uint64_t key);
/* Iterate: size_t it = 0; while (ptw_map_next(m, &it, &k, &v)) ... Do not insert meanwhile. */
bool ptw_map_next(const struct ptw_map *m, size_t *it, uint64_t *ret_key, void **ret_val);
void ptw_map_free(struct ptw_map *m);

/* Hash of a NUL-terminated string, never 0 or UINT64_MAX (usable as a map key). */
uint64_t ptw_str_hash(const char *s);

/* --debug=DOMAIN,...: off by default, costs one test of a global when off. */
enum ptw_debug_domain {
	PTW_DBG_ATTACH = 1u << 0,
	PTW_DBG_TDB = 1u << 1,
	PTW_DBG_BP = 1u << 2,
	PTW_DBG_SYM = 1u << 3,
	PTW_DBG_SPANS = 1u << 4,
	PTW_DBG_TRACER = 1u << 5,
};
extern unsigned ptw_debug_mask;
/* Parses "attach,tdb,bp,sym,spans,tracer" or "all"; returns -EINVAL on an unknown name. */
int ptw_debug_parse(const char *spec);
void ptw_debug_print(unsigned domain, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ptw_dbg(domain, ...)                                                                       \
	do {                                                                                       \
		if (__builtin_expect(ptw_debug_mask & (domain), 0))                                \
			ptw_debug_print((domain), __VA_ARGS__);                                    \
	} while (0)

/* Dies of sig as a process killed by it would, without a core dump of our
 * own (like strace when its command dies of a signal). */
void ptw_die_of_signal(int sig) __attribute__((noreturn));

/*
 * Names this process for ps, top, pidof and pkill: its comm (first 15 bytes
 * of title[0]) and its command line, title (NULL-terminated) written over
 * the argument strings of argv (main's): it is cut at an argument boundary
 * where it does not fit. Copy whatever of argv is still needed first.
 */
void ptw_set_process_title(char **argv, const char *const *title);

/* Name of a signal ("SIGSEGV", "SIGRT3"); never NULL. */
const char *ptw_signame(int sig);

/* Length of the valid UTF-8 sequence at p (ASCII: 1), looking at no more
 * than avail bytes, nor past a byte that breaks it (a NUL does); 0 if it is
 * not one (a stray byte, overlong, a surrogate, past U+10FFFF). */
size_t ptw_utf8_sequence(const unsigned char *p, size_t avail);

/*
 * Text for a terminal or a log from a string someone else controls (a
 * thread's name, a path, argv, a symbol): printable ASCII and valid UTF-8
 * as they are; a backslash doubled; \n, \t, \r; any other control byte
 * (C0, DEL), a C1 control (U+0080..U+009F: both of its bytes) and a byte
 * that is not part of valid UTF-8 as \xHH, as strace writes them. The
 * result holds no byte a terminal acts on, and a name reads back whole.
 */
void ptw_buf_put_escaped(struct ptw_buf *b, const char *s);
void ptw_buf_put_escaped_n(struct ptw_buf *b, const char *s, size_t n);
/* The same, as a new string (NULL stays NULL). */
char *ptw_escape_str(const char *s);
/* Would ptw_buf_put_escaped change s? */
bool ptw_needs_escape(const char *s);

/* Writes all of buf (again after EINTR and short writes); 0 or -errno. */
int ptw_write_all(int fd, const void *buf, size_t len);
/* Flushes stdio, then points standard input, output and error at
 * /dev/null: for a process that lives on once it has said everything, so
 * that whoever reads what it wrote (a pipe: ptwatch --json | jq) sees the
 * end without waiting for it. */
void ptw_stdio_to_null(void);

/* A thread of ptwatch's own running fn(arg), with every signal blocked in
 * it (the caller's signals are the caller's: its mask is as it was on
 * return); stack: its size in bytes, 0 for the default. 0, or the errno
 * value pthread_create gave. */
int ptw_thread_start(pthread_t *th, size_t stack, void *(*fn)(void *), void *arg);

/* Drops the one newline that ends a /proc file's line (a comm may hold
 * others of its own: it is anyone's to set). */
void ptw_chomp(char *s);
/* Opens path for reading if it is a regular file, never waiting (a FIFO
 * or device planted where a file is expected is refused, -EINVAL) and not
 * through a symbolic link (-ELOOP): for files ptwatch does not control.
 * The descriptor, or -errno. */
int ptw_open_regular(const char *path);
/* Reads a small /proc file into buf (NUL-terminated, trailing newline kept); -errno on failure. */
int ptw_read_small_file(const char *path, char *buf, size_t size);
/* The same, path relative to the directory dir_fd (or AT_FDCWD). */
int ptw_read_small_file_at(int dir_fd, const char *path, char *buf, size_t size);

/* ---- /proc (src/util/procfs.c) ---- */

/* The state letter of thread tid of process pid (R, S, D, T, t, Z, X...)
 * from /proc/PID/task/TID/stat; 0 if it cannot be read (gone). */
char ptw_proc_state(pid_t pid, pid_t tid);
/* Has that thread exited (zombie, dead, or gone)? */
bool ptw_proc_exited(pid_t pid, pid_t tid);
/* Or is it on its way out (PF_EXITING: set as do_exit begins, before its
 * memory goes)? A write to a process's memory that fails with EIO while
 * its thread is stopped means this: every thread has let go of it. */
bool ptw_proc_exiting(pid_t pid, pid_t tid);
/* include/linux/sched.h: the task is exiting (/proc stat's flags, field 9). */
#define PTW_PF_EXITING 0x00000004u
/* Field `field` of /proc/PID/stat, numbered as in proc(5) (9: flags, 47:
 * start_brk), as a number; false if unreadable. For a whole process: the
 * kernel walks all its threads for this file. */
bool ptw_proc_stat_field(pid_t pid, int field, unsigned long long *ret);
/* Field `name` of /proc/TID/status ("TracerPid") as a number; -1 if absent. */
long ptw_proc_status_field(pid_t tid, const char *name);
/* The tids in /proc/PID/task, malloc'd in *ret (NULL on failure); their
 * number, or -errno. */
int ptw_proc_tids(pid_t pid, pid_t **ret);
/* argv of pid from /proc/PID/cmdline (NULL-terminated, malloc'd; NULL:
 * unreadable). */
char **ptw_proc_cmdline(pid_t pid);
/* Whether the 64-bit ELF file at path has no program interpreter (a
 * static program); false when it cannot be read or is not one. */
bool ptw_elf_is_static(const char *path);
struct ptw_cpu;
/* Thread tid of process pid's CPU so far (ptw_events.h): schedstat's time
 * on a CPU and waiting for one, status's context switches; and, when name
 * is not NULL, its name from the same read (ptw_proc_status_name: a thread's
 * end costs two files, not three). task_dirfd: /proc/PID/task if open
 * (cheaper), else -1. 0, or -errno (gone; a kernel without scheduler
 * statistics). */
int ptw_proc_thread_cpu(int task_dirfd, pid_t pid, pid_t tid, struct ptw_cpu *ret, char *name,
			size_t name_size);
/* Only schedstat's two figures (time on a CPU, waiting for one): one file,
 * for a figure read again and again (the live table's CPU%). */
int ptw_proc_thread_schedstat(int task_dirfd, pid_t pid, pid_t tid, uint64_t *on_cpu_ns,
			      uint64_t *runnable_ns);
/* The name in /proc/PID/status text (its first line, "Name:\t..."), as
 * /proc/PID/comm has it: the kernel writes a backslash and a newline
 * there as \\ and \n, every other byte as it is. Cut to size. False if
 * the text does not begin so. */
bool ptw_proc_status_name(const char *status, char *name, size_t size);
/* What execvp will run for name: with a '/', name itself; else the first
 * executable regular file of that name in PATH (its default when unset).
 * False when there is none. */
bool ptw_command_path(const char *name, char *ret, size_t size);
/* Is signal sig pending in process pid (for it, or for one of its
 * threads: blocked, or not yet delivered)? */
bool ptw_proc_sig_pending(pid_t pid, int sig);
/* Is sig at its default action in process pid (neither caught nor ignored)?
 * False if unreadable. */
bool ptw_proc_sig_default(pid_t pid, int sig);
/* Whether process pid has a handler for sig (SigCgt). */
bool ptw_proc_sig_caught(pid_t pid, int sig);
/* What the threads of a process are, from one reading of each one's
 * /proc/PID/task/TID/status (the expensive part of a census of 10,000
 * threads is opening the files: read each once) or, unless every_thread,
 * of its main thread's alone (all of them if that one has exited). */
struct ptw_census {
	int threads;	  /* listed in /proc/PID/task */
	int alive;	  /* neither zombie nor dead */
	int stopped;	  /* state T (group stop) */
	pid_t traced_by;  /* TracerPid of the first traced thread, 0 if none */
	int fatal_signal; /* a pending signal that will end the process (not
			   * blocked by the thread it waits for, neither caught
			   * nor ignored, fatal by default), or 0 */
};
void ptw_proc_census(pid_t pid, bool every_thread, struct ptw_census *ret);
/* The children of every thread of pid (/proc/PID/task/TID/children),
 * appended to *kids (and the thread that forked each to *tids, unless tids
 * is NULL) after the n there already; the new count. */
size_t ptw_proc_children(pid_t pid, pid_t **kids, pid_t **tids, size_t n);
/* Does any thread of pid still run? (Its main thread may be a zombie while
 * the others go on.) */
bool ptw_proc_alive(pid_t pid);
/* Whether tasks a and b share one address space (kcmp(2) KCMP_VM): 1 or
 * 0, or -errno when the kernel cannot tell (no kcmp, a task gone). */
int ptw_proc_same_vm(pid_t a, pid_t b);

/* One line of /proc/PID/maps. */
struct ptw_mapping {
	uint64_t start, end, offset, inode;
	unsigned dev_major, dev_minor;
	char perms[5];
	char path[256]; /* "" for anonymous mappings; truncated if longer */
};
/* Reads /proc/PID/maps into a sorted array (caller frees). Returns the
 * count or -errno. */
int ptw_maps_read(pid_t pid, struct ptw_mapping **ret);
/* The mapping containing addr in maps, or NULL. */
const struct ptw_mapping *ptw_maps_find(const struct ptw_mapping *maps, int n, uint64_t addr);
/* The first mapping of maps whose path is path ("[uprobes]", say), or NULL. */
const struct ptw_mapping *ptw_maps_named(const struct ptw_mapping *maps, int n, const char *path);

/* Name of a system call number likely to block ("futex", "read"), or NULL. */
const char *ptw_syscall_name(long nr);

#endif
