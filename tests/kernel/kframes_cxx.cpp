// SPDX-License-Identifier: MIT
// tests/fixtures/frames_cxx.cpp (a C++ exception through traced frames)
// behind an attach handshake (attach.h): "ready PID", then 'g'.
#define main cxx_main
#include "frames_cxx.cpp"
#undef main

#include "attach.h"

int main()
{
	reply("ready %d", (int)getpid());
	if (next_command() != 'g')
		die("unexpected command", 0);
	char *none[] = { NULL };
	return cxx_main(0, none);
}
