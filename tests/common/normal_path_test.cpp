// normal_path(): a path with its spelling undone ("." and ".." parts, double
// slashes, a process's /proc/PID/root view), " (deleted)" kept at the end.
// Paths already normal take a shortcut: each case below is one the shortcut
// must hand to the full walk, or give back as it came.
#include <string>

#include <gtest/gtest.h>

#include "gpuguard/common/text.h"

namespace {

using gpuguard::normal_path;

TEST(NormalPath, paths_already_normal_come_back_unchanged) {
    for (const char* path :
         {"/", "/usr/bin/xmrig", "/tmp/.mount_x/AppRun", "/a/.hidden/b", "/a/..b/c", "/a/b.",
          "/usr/bin/x (deleted)", "/ (deleted)", "/procfs/x", "/a/b c/d"}) {
        SCOPED_TRACE(path);
        EXPECT_TRUE(gpuguard::is_normal_path(path));
        EXPECT_EQ(normal_path(path), path);
    }
}

TEST(NormalPath, spelling_is_undone) {
    for (const char* path : {"/usr//bin/x", "/usr/./bin/x", "/a/../b", "/tmp/x/", "/tmp/x/.",
                             "/tmp/x/..", "/usr/bin/ (deleted)", "/proc/self/root/tmp/x"}) {
        EXPECT_FALSE(gpuguard::is_normal_path(path)) << path;
    }
    EXPECT_EQ(normal_path("/usr//bin/x"), "/usr/bin/x");
    EXPECT_EQ(normal_path("/usr/./bin/x"), "/usr/bin/x");
    EXPECT_EQ(normal_path("/usr/lib/../bin/x"), "/usr/bin/x");
    EXPECT_EQ(normal_path("/../tmp/x"), "/tmp/x");
    EXPECT_EQ(normal_path("/tmp/x/."), "/tmp/x");
    EXPECT_EQ(normal_path("/tmp/x/.."), "/tmp");
    EXPECT_EQ(normal_path("/tmp/x/"), "/tmp/x");
    EXPECT_EQ(normal_path("//"), "/");
    EXPECT_EQ(normal_path("/usr/bin/ (deleted)"), "/usr/bin (deleted)");
    EXPECT_EQ(normal_path("/tmp/./x (deleted)"), "/tmp/x (deleted)");
    EXPECT_EQ(normal_path("/tmp/x/.. (deleted)"), "/tmp (deleted)");
    EXPECT_EQ(normal_path("/proc/self/root/tmp/x"), "/tmp/x");
    EXPECT_EQ(normal_path("/proc/4242/root/proc/thread-self/root/tmp/x"), "/tmp/x");
    EXPECT_EQ(normal_path("/proc/4242/exe"), "/proc/4242/exe");
    EXPECT_EQ(normal_path("/proc"), "/proc");
    EXPECT_EQ(normal_path("relative/../x"), "relative/../x");  // only absolute paths
}

}  // namespace
