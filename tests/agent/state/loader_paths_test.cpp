// read_loader_paths and package_owner (gpuguard/state/loader_paths.h,
// package_owner.h) over a fake /proc whose process 42 has a root and a
// working directory of the test's making: what vouches for each library
// entry (dpkg's lists, a conda environment, a virtualenv, installed Python
// distributions), its real path inside that root (symlinks that point
// outside it stay inside), its age and who else can write it.
#include "gpuguard/state/loader_paths.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include "gpuguard/state/package_owner.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gpuguard::agent::check_package_file;
using gpuguard::agent::LoaderPath;
using gpuguard::agent::package_owner;
using gpuguard::agent::ProcessEnv;
using gpuguard::agent::read_loader_paths;

constexpr int64_t kNow = 2'000'000'000;  // the clock ages are taken against
constexpr int64_t kMonth = 30 * 86400;

class LoaderPaths : public ::testing::Test {
  protected:
    void SetUp() override {
        fs::create_directories(proc_ / "42");
        fs::create_directories(root_);
        fs::create_symlink(root_, proc_ / "42" / "root");
        fs::create_directories(root_ / "home/u/work");
        fs::create_symlink(root_ / "home/u/work", proc_ / "42" / "cwd");
    }
    // A file of the root, changed `age` seconds before kNow.
    fs::path file(const std::string& path, int64_t age = kMonth, const std::string& text = "") {
        const fs::path at = root_ / path.substr(1);
        fs::create_directories(at.parent_path());
        std::ofstream(at) << text;
        aged(path, age);
        return at;
    }
    void aged(const std::string& path, int64_t age) {
        const struct utimbuf times {
            static_cast<time_t>(kNow - age), static_cast<time_t>(kNow - age)
        };
        ASSERT_EQ(::utime((root_ / path.substr(1)).c_str(), &times), 0) << path;
    }
    std::vector<LoaderPath> read(std::string preload, std::string library_path) {
        ProcessEnv env;
        if (!preload.empty()) env.ld_preload = std::move(preload);
        if (!library_path.empty()) env.ld_library_path = std::move(library_path);
        return read_loader_paths(42, env, proc_.path().string(), kNow);
    }
    gpuguard::testing::TempDir proc_{"gg-loader-proc"};
    fs::path root_ = proc_ / "rootfs";
};

TEST_F(LoaderPaths, packages_and_environments_vouch_by_what_their_prefix_holds) {
    file("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
    file("/var/lib/dpkg/info/libjemalloc2:amd64.list", kMonth,
         "/.\n/usr\n/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n/usr/share/doc/libjemalloc2\n");
    file("/opt/conda/envs/rapids/conda-meta/history");
    file("/opt/conda/envs/rapids/lib/libcudf.so", 120);  // an environment made just now
    aged("/opt/conda/envs/rapids/lib", 120);
    file("/home/u/.venv/pyvenv.cfg", kMonth, "home = /usr/bin\n");
    file("/home/u/.venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
    file("/srv/py/site-packages/nvidia_nccl_cu12-2.21.5.dist-info/RECORD");
    file("/srv/py/site-packages/nvidia/nccl/lib/libnccl.so.2");
    file("/srv/other/site-packages/nvidia/nccl/lib/libnccl.so.2");  // no distributions there

    const auto paths =
        read("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 libtcmalloc.so.4",
             "/opt/conda/envs/rapids/lib::/home/u/.venv/lib/python3.11/site-packages/nvidia/cudnn/"
             "lib;/srv/py/site-packages/nvidia/nccl/lib:/srv/other/site-packages/nvidia/nccl/lib");
    ASSERT_EQ(paths.size(), 5u) << "a preload without '/' and the empty entry are not entries";
    EXPECT_EQ(paths[0].variable, "LD_PRELOAD");
    EXPECT_EQ(paths[0].vouched_by, "dpkg:libjemalloc2");
    EXPECT_EQ(paths[0].age_s, kMonth);
    EXPECT_EQ(paths[1].variable, "LD_LIBRARY_PATH");
    EXPECT_EQ(paths[1].vouched_by, "conda:/opt/conda/envs/rapids");
    EXPECT_EQ(paths[1].age_s, 120) << "a directory is as new as its newest library";
    EXPECT_EQ(paths[2].vouched_by, "virtualenv:/home/u/.venv");
    EXPECT_EQ(paths[3].vouched_by, "python:/srv/py/site-packages");
    EXPECT_EQ(paths[4].vouched_by, "");
    for (const auto& entry : paths) {
        EXPECT_EQ(entry.resolved, entry.path) << entry.path;
        EXPECT_FALSE(entry.others_can_write) << entry.path;
    }
}

TEST_F(LoaderPaths, real_paths_stay_inside_the_root_and_missing_ones_are_said) {
    file("/dev/shm/.x/libhide.so", 30);
    // An absolute symlink is the process's own: inside its root, not the agent's.
    fs::create_directories(root_ / "opt/app");
    fs::create_symlink("/dev/shm/.x", root_ / "opt/app/lib");
    fs::create_symlink("../../../../../../../dev/shm/.x/libhide.so", root_ / "opt/app/libz.so");
    fs::create_directories(root_ / "home/u/work/lib");

    const auto paths = read("/opt/app/libz.so", "/opt/app/lib:lib:/usr/local/nvidia/lib64");
    ASSERT_EQ(paths.size(), 4u);
    EXPECT_EQ(paths[0].resolved, "/dev/shm/.x/libhide.so") << "'..' stops at the root";
    EXPECT_EQ(paths[0].age_s, 30);
    EXPECT_EQ(paths[1].resolved, "/dev/shm/.x");
    EXPECT_EQ(paths[2].resolved, "/home/u/work/lib") << "relative: from the working directory";
    EXPECT_EQ(paths[3].resolved, "");
    EXPECT_EQ(paths[3].age_s, -1);
    EXPECT_EQ(paths[3].vouched_by, "");
    ProcessEnv gone;
    gone.ld_preload = "/opt/app/libz.so";
    EXPECT_TRUE(read_loader_paths(43, gone, proc_.path().string(), kNow).empty());
}

TEST_F(LoaderPaths, others_who_can_write_the_library_or_its_directory_are_said) {
    file("/srv/shared/lib/libfoo.so");
    file("/srv/mine/lib/libbar.so");
    file("/srv/sticky/libbaz.so");
    ASSERT_EQ(::chmod((root_ / "srv/shared/lib").c_str(), 0777), 0);
    ASSERT_EQ(::chmod((root_ / "srv/mine/lib/libbar.so").c_str(), 0666), 0);
    ASSERT_EQ(::chmod((root_ / "srv/sticky").c_str(), 01777), 0);  // like /tmp
    aged("/srv/shared/lib", kMonth);
    const auto paths =
        read("/srv/shared/lib/libfoo.so /srv/sticky/libbaz.so", "/srv/mine/lib:/srv/shared/lib");
    ASSERT_EQ(paths.size(), 4u);
    EXPECT_TRUE(paths[0].others_can_write) << "its directory is o+w";
    EXPECT_FALSE(paths[1].others_can_write) << "a sticky directory: only the owner replaces it";
    EXPECT_TRUE(paths[2].others_can_write) << "a library in it is o+w";
    EXPECT_TRUE(paths[3].others_can_write);
}

TEST_F(LoaderPaths, package_owner_reads_dpkg_lists_with_both_usr_spellings) {
    file("/var/lib/dpkg/info/coreutils.list", kMonth, "/.\n/bin\n/bin/ls\n/usr/bin/stat\n");
    file("/var/lib/dpkg/info/nvidia-persistenced.list", kMonth,
         "/usr/bin/nvidia-persistenced\n/usr/local/bin/odd\n");
    const std::string root = root_.string();
    EXPECT_EQ(package_owner(root, "/usr/bin/ls"), "dpkg:coreutils") << "merged /usr";
    EXPECT_EQ(package_owner(root, "/bin/stat"), "dpkg:coreutils");
    EXPECT_EQ(package_owner(root, "/usr/bin/nvidia-persistenced"), "dpkg:nvidia-persistenced");
    EXPECT_EQ(package_owner(root, "/usr/bin/nvidia-persistenced2"), "");
    EXPECT_EQ(package_owner(root, "/usr/bin/nvidia"), "") << "whole lines only";
    EXPECT_EQ(package_owner(root, "/usr/local/bin/odd"), "") << "never /usr/local";
    EXPECT_EQ(package_owner(root, "/opt/x"), "");
    EXPECT_EQ(package_owner((proc_ / "nowhere").string(), "/usr/bin/ls"), "") << "no database";
    // A package installed since: the database changed, the answer too.
    std::ofstream(root_ / "var/lib/dpkg/info/gg-new.list.tmp") << "/usr/bin/gg-new\n";
    EXPECT_EQ(package_owner(root, "/usr/bin/gg-new"), "");
    fs::rename(root_ / "var/lib/dpkg/info/gg-new.list.tmp",
               root_ / "var/lib/dpkg/info/gg-new.list");
    struct timespec later[2] = {{0, UTIME_OMIT}, {kNow + 10, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (root_ / "var/lib/dpkg/info").c_str(), later, 0), 0);
    EXPECT_EQ(package_owner(root, "/usr/bin/gg-new"), "dpkg:gg-new");
}

TEST_F(LoaderPaths, check_package_file_compares_the_md5_dpkg_recorded) {
    const std::string sum(32, 'a'), other(32, 'b');
    file("/var/lib/dpkg/info/curl.list", kMonth, "/.\n/usr/bin\n/usr/bin/curl\n");
    file("/var/lib/dpkg/info/curl.md5sums", kMonth,
         other + "  usr/bin/curl-config\n" + other + "  opt/usr/bin/curl\n" + sum +
             "  usr/bin/curl\n");
    file("/var/lib/dpkg/info/coreutils:amd64.list", kMonth, "/bin/ls\n/usr/bin/nosum\n");
    file("/var/lib/dpkg/info/coreutils:amd64.md5sums", kMonth, sum + "  bin/ls\n");
    const std::string root = root_.string();
    auto check = check_package_file(root, "/usr/bin/curl", sum);
    EXPECT_EQ(check.owner, "dpkg:curl");
    EXPECT_EQ(check.check, "intact");
    EXPECT_EQ(check_package_file(root, "/usr/bin/curl", other).check, "modified");
    // The architecture-qualified lists, and the merged-/usr spelling.
    check = check_package_file(root, "/usr/bin/ls", sum);
    EXPECT_EQ(check.owner, "dpkg:coreutils");
    EXPECT_EQ(check.check, "intact");
    EXPECT_EQ(check_package_file(root, "/usr/bin/nosum", sum).check, "unverified");
    // The sums of curl-config and of a longer path that ends the same way
    // come first in the list: neither is taken for curl's (above).
    EXPECT_EQ(check_package_file(root, "/home/dev/.cache/curl", sum).check, "unowned");
    EXPECT_EQ(check_package_file(root, "/usr/local/bin/curl", sum).check, "unowned");
    check = check_package_file((proc_ / "nowhere").string(), "/usr/bin/curl", sum);
    EXPECT_EQ(check.owner, "");
    EXPECT_EQ(check.check, "") << "no database: not checked";
}

}  // namespace
