/* SPDX-License-Identifier: MIT */
/* The demangling call: C++, Rust legacy and v0 names; C names untouched. */
#include <stdlib.h>

#include "check.h"
#include "ptw_demangle.h"

static void check(const char *mangled, const char *want)
{
	char *got = ptw_demangle(mangled);
	if (want)
		CHECK_STR(got, want);
	else if (got)
		CHECK_STR(got, "(nothing)");
	free(got);
}

int main(void)
{
	/* C++: a static function, a static member, a lambda, a JVM's thread entry. */
	check("_ZN6Worker3runEPv", "Worker::run(void*)");
	check("_ZN7fixture6Worker3runEPv", "fixture::Worker::run(void*)");
	check("_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const");
	check("_ZL19thread_native_entryP6Thread", "thread_native_entry(Thread*)");
	/* Rust legacy (Itanium-like, with a ::h<hash> that goes away). */
	check("_ZN7mycrate4main17h9a8b7c6d5e4f3a2bE", "mycrate::main");
	check("_ZN3std2rt10lang_start17h0123456789abcdefE", "std::rt::lang_start");
	/* Rust v0. */
	check("_RNvNtCs1234_7mycrate3foo3bar", "mycrate::foo::bar");
	check("_RINvNtC3std3mem8align_ofdE", "std::mem::align_of::<f64>");
	/* Not mangled, or not understood: the caller keeps the name. */
	check("main", NULL);
	check("pthread_create", NULL);
	check("_start", NULL);
	check("__libc_start_main", NULL);
	check("_Zbogus", NULL);
	check("_R", NULL);
	check("", NULL);
	CHECK(ptw_demangle(NULL) == NULL);
	CHECK_DONE();
}
