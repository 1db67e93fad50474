// A process hider of the libprocesshider kind, built for the hidden-process
// tests (hidden_process_test.cpp): preloaded (LD_PRELOAD or ld.so.preload),
// its readdir and readdir64 skip the entries of /proc whose process name
// (/proc/PID/comm) is GG_HIDE_COMM from the environment. Everything else
// passes through to libc's own (dlsym(RTLD_NEXT)). With GG_HIDE_SLOPPY_ERRNO
// set it is a careless one, as many are: the end of every listing comes
// with errno left at ENOENT (from its own open of a /proc/PID/comm that
// vanished), which a careful caller of readdir takes for a failed listing.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Whether `name`, an entry of the directory `dirp` reads, is a process in
// /proc named GG_HIDE_COMM.
static int hidden_entry(DIR* dirp, const char* name) {
    const char* hide = getenv("GG_HIDE_COMM");
    if (!hide || !*hide || name[0] < '0' || name[0] > '9') return 0;
    char link[64], dir[64];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd(dirp));
    const ssize_t n = readlink(link, dir, sizeof(dir) - 1);
    if (n < 0) return 0;
    dir[n] = '\0';
    if (strcmp(dir, "/proc") != 0) return 0;
    char path[96], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/%s/comm", name);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const ssize_t got = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    if (got <= 0) return 0;
    comm[got] = '\0';
    comm[strcspn(comm, "\n")] = '\0';
    return strcmp(comm, hide) == 0;
}

struct dirent* readdir(DIR* dirp) {
    static struct dirent* (*real)(DIR*);
    if (!real) real = (struct dirent * (*)(DIR*)) dlsym(RTLD_NEXT, "readdir");
    struct dirent* entry;
    while ((entry = real(dirp)) && hidden_entry(dirp, entry->d_name)) {
    }
    if (!entry && getenv("GG_HIDE_SLOPPY_ERRNO")) errno = ENOENT;
    return entry;
}

struct dirent64* readdir64(DIR* dirp) {
    static struct dirent64* (*real)(DIR*);
    if (!real) real = (struct dirent64 * (*)(DIR*)) dlsym(RTLD_NEXT, "readdir64");
    struct dirent64* entry;
    while ((entry = real(dirp)) && hidden_entry(dirp, entry->d_name)) {
    }
    if (!entry && getenv("GG_HIDE_SLOPPY_ERRNO")) errno = ENOENT;
    return entry;
}
