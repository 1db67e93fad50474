// A process that does nothing, whatever it is named or given: tests copy it
// under an innocuous name (python3) into a directory of their making and
// start it with the arguments they want /proc to show. When GG_LOAD names a
// library it maps it first (dlopen: exits 4 when that fails). When GG_HOLD
// names a file it then opens it and keeps it open (a fake GPU node). It waits for a
// signal; with GG_HOLD_FAILED set it exits 3 when the open failed.
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main() {
    if (const char* library = getenv("GG_LOAD"); library && *library) {
        if (!dlopen(library, RTLD_NOW)) return 4;
    }
    if (const char* path = getenv("GG_HOLD"); path && *path) {
        if (open(path, O_RDONLY | O_CLOEXEC) < 0) return 3;
    }
    while (true) pause();
}
