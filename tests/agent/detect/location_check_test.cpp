// check_location (agent/detect/location_check.cpp): what a look-alike
// location's name claims, checked with real processes: a program unpacked
// into /tmp/_MEI*, /tmp/onefile_PID_* or ollama*/runners/ and started by a
// shell that does (or does not) stand behind it, a directory named like an
// AppImage's mount with nothing mounted, and a FUSE mount read from a fake
// /proc tree.
#include "location_check.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuguard/state/process_origin.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

// A directory the test makes at an exact path, removed with what is in it.
class MadeDir {
  public:
    explicit MadeDir(fs::path path) : path_(std::move(path)) { fs::create_directories(path_); }
    ~MadeDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    const fs::path& path() const { return path_; }

  private:
    fs::path path_;
};

// The child of `parent` running `exe`, once it runs (0 after 5 s).
pid_t child_running(pid_t parent, const std::string& exe) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
        std::ifstream children("/proc/" + std::to_string(parent) + "/task/" +
                               std::to_string(parent) + "/children");
        pid_t child = 0;
        while (children >> child) {
            std::error_code error;
            if (fs::read_symlink("/proc/" + std::to_string(child) + "/exe", error) == exe) {
                return child;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
}

// `launcher -c script` (a shell that stays the program's parent), and the
// program `exe` it starts.
struct Launched {
    pid_t shell;
    pid_t program;
};
Launched launch(const std::string& launcher, const std::string& script, const std::string& exe) {
    const pid_t shell = testing::spawn_process(launcher, {"sh", "-c", script + "; true"}, "/");
    return Launched{shell, shell > 0 ? child_running(shell, exe) : 0};
}

// The program a runtime "unpacked": a copy of sleep in `dir`.
std::string unpack(const fs::path& dir, const std::string& name) {
    fs::create_directories(dir);
    fs::copy_file("/bin/sleep", dir / name, fs::copy_options::overwrite_existing);
    return (dir / name).string();
}

std::string tag() { return std::to_string(getpid()); }

TEST(LocationCheck, aPyInstallerDirectoryHoldsOnlyWhenAnAncestorOutsideTmpUsesIt) {
    MadeDir unpacked("/tmp/_MEIgg" + tag());
    const std::string exe = unpack(unpacked.path(), "ffmpeg");
    std::ofstream(unpacked.path() / "libpython3.11.so.1.0") << "not a library";
    const std::string library = (unpacked.path() / "libpython3.11.so.1.0").string();

    // The runtime's program keeps a file of its unpack directory open.
    const Launched holder = launch("/bin/sh", "exec 3<" + library + "; " + exe + " 30", exe);
    testing::ChildReaper reap_holder(holder.shell), reap_holder_program(holder.program);
    ASSERT_GT(holder.program, 0);
    const std::string verified = check_location(holder.program, exe, "/proc");
    EXPECT_TRUE(verified.starts_with("verified: PyInstaller: ")) << verified;
    EXPECT_NE(verified.find("(pid " + std::to_string(holder.shell) + ") uses files from " +
                            unpacked.path().string()),
              std::string::npos)
        << verified;

    // A shell that only starts it: the name is all there is.
    const Launched starter = launch("/bin/sh", exe + " 30", exe);
    testing::ChildReaper reap_starter(starter.shell), reap_starter_program(starter.program);
    ASSERT_GT(starter.program, 0);
    EXPECT_EQ(check_location(starter.program, exe, "/proc"),
              "refused: PyInstaller: no ancestor outside a temporary directory uses files from " +
                  unpacked.path().string());

    // A launcher in a temporary directory vouches for nothing, open file or not.
    MadeDir dropper_dir("/tmp/gg-dropper-" + tag());
    fs::copy_file("/bin/sh", dropper_dir.path() / "sh");
    const Launched dropper =
        launch((dropper_dir.path() / "sh").string(), "exec 3<" + library + "; " + exe + " 30", exe);
    testing::ChildReaper reap_dropper(dropper.shell), reap_dropper_program(dropper.program);
    ASSERT_GT(dropper.program, 0);
    EXPECT_TRUE(check_location(dropper.program, exe, "/proc").starts_with("refused: PyInstaller"));
    // Not a look-alike at all: nothing to check.
    EXPECT_EQ(check_location(dropper.program, "/usr/bin/sleep", "/proc"), "");
}

TEST(LocationCheck, aNuitkaDirectoryMustNameTheAncestorThatUnpackedIt) {
    // The shell unpacks into onefile_<its own pid>_<time>, as Nuitka's bootstrap does.
    MadeDir parent_dir("/tmp/gg-nuitka-" + tag());
    const std::string own = "/tmp/onefile_$$_1700000000";
    const pid_t shell = testing::spawn_process("/bin/sh",
                                               {"sh", "-c",
                                                "mkdir -p " + own + " && cp /bin/sleep " + own +
                                                    "/app && " + own + "/app 30; rm -rf " + own},
                                               "/");
    testing::ChildReaper reap_shell(shell);
    const std::string dir = "/tmp/onefile_" + std::to_string(shell) + "_1700000000";
    MadeDir cleanup(dir);
    const pid_t program = child_running(shell, dir + "/app");
    testing::ChildReaper reap_program(program);
    ASSERT_GT(program, 0);
    const std::string verified = check_location(program, dir + "/app", "/proc");
    EXPECT_TRUE(
        verified.starts_with("verified: Nuitka: /usr/bin/dash (pid " + std::to_string(shell) +
                             ")") ||
        verified.starts_with("verified: Nuitka: /usr/bin/bash (pid " + std::to_string(shell) + ")"))
        << verified;

    // The same program under a directory naming somebody else.
    const std::string exe = unpack("/tmp/onefile_999999999_1700000000", "app");
    MadeDir other("/tmp/onefile_999999999_1700000000");
    const Launched stranger = launch("/bin/sh", exe + " 30", exe);
    testing::ChildReaper reap_stranger(stranger.shell), reap_stranger_program(stranger.program);
    ASSERT_GT(stranger.program, 0);
    EXPECT_EQ(check_location(stranger.program, exe, "/proc"),
              "refused: Nuitka: no ancestor is pid 999999999, which "
              "/tmp/onefile_999999999_1700000000 names as the program that unpacked it");
}

TEST(LocationCheck, anOllamaRunnerMustDescendFromAnOllamaServerOutsideTmp) {
    // The "server": a shell named ollama where no temporary directory is.
    const fs::path home = geteuid() == 0 ? fs::path("/run") : fs::current_path();
    MadeDir server_dir(home / ("gg-ollama-" + tag()));
    fs::copy_file("/bin/sh", server_dir.path() / "ollama");
    fs::copy_file("/bin/sh", server_dir.path() / "llm-server");
    MadeDir runners("/tmp/ollama" + tag());
    const std::string exe = unpack(runners.path() / "runners" / "cuda_v12", "ollama_llama_server");

    const Launched served = launch((server_dir.path() / "ollama").string(), exe + " 30", exe);
    testing::ChildReaper reap_server(served.shell), reap_runner(served.program);
    ASSERT_GT(served.program, 0);
    const std::string verified = check_location(served.program, exe, "/proc");
    EXPECT_EQ(verified, "verified: Ollama: " + (server_dir.path() / "ollama").string() + " (pid " +
                            std::to_string(served.shell) + ") is the Ollama server of its runners");

    const Launched other = launch((server_dir.path() / "llm-server").string(), exe + " 30", exe);
    testing::ChildReaper reap_other(other.shell), reap_other_runner(other.program);
    ASSERT_GT(other.program, 0);
    EXPECT_TRUE(check_location(other.program, exe, "/proc").starts_with("refused: Ollama: "));
}

TEST(LocationCheck, anAppImageDirectoryMustBeAFuseMount) {
    MadeDir mount_dir("/tmp/.mount_gg" + tag());
    const std::string exe = unpack(mount_dir.path() / "usr" / "bin", "krita");
    const Launched plain = launch("/bin/sh", exe + " 30", exe);
    testing::ChildReaper reap_shell(plain.shell), reap_program(plain.program);
    ASSERT_GT(plain.program, 0);
    EXPECT_EQ(check_location(plain.program, exe, "/proc"),
              "refused: AppImage: nothing is mounted at " + mount_dir.path().string());

    // A fake /proc: the AppImage runtime's FUSE mount, then a tmpfs there.
    testing::TempDir proc;
    fs::create_directories(proc / "4242");
    const auto mountinfo = [&](const std::string& line) {
        std::ofstream(proc / "4242" / "mountinfo")
            << "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
            << line << "\n";
    };
    mountinfo(
        "90 22 0:52 / /tmp/.mount_Krita9x ro,nosuid,nodev,relatime shared:50 - "
        "fuse.krita-5.2.2-x86_64.appimage krita-5.2.2-x86_64.appimage ro,user_id=1000");
    EXPECT_EQ(check_location(4242, "/tmp/.mount_Krita9x/usr/bin/krita", proc.path().string()),
              "verified: AppImage: fuse.krita-5.2.2-x86_64.appimage mounted at "
              "/tmp/.mount_Krita9x");
    mountinfo("90 22 0:52 / /tmp/.mount_Krita9x rw shared:50 - tmpfs tmpfs rw");
    EXPECT_EQ(check_location(4242, "/tmp/.mount_Krita9x/usr/bin/krita", proc.path().string()),
              "refused: AppImage: /tmp/.mount_Krita9x is a tmpfs mount, not an AppImage's");
}

TEST(ProcessOrigin, mountinfoAndMapsAreReadWithTheirEscapes) {
    const std::string mountinfo =
        "22 1 259:1 / / rw - ext4 /dev/vda1 rw\n"
        "90 22 0:52 / /tmp/.mount_My\\040App ro master:3 - fuse.My\\040App My\\040App ro\n"
        "91 22 0:53 / /tmp/x rw - tmpfs a rw\n"
        "92 22 0:54 / /tmp/x rw - squashfs b ro\n"
        "garbage\n";
    const auto spaced = mount_at_in(mountinfo, "/tmp/.mount_My App");
    ASSERT_TRUE(spaced);
    EXPECT_EQ(spaced->fstype, "fuse.My App");
    EXPECT_EQ(spaced->source, "My App");
    ASSERT_TRUE(mount_at_in(mountinfo, "/tmp/x"));
    EXPECT_EQ(mount_at_in(mountinfo, "/tmp/x")->fstype, "squashfs");  // the one on top
    EXPECT_FALSE(mount_at_in(mountinfo, "/tmp"));

    const std::string maps =
        "7f00-7f01 r-xp 00000000 08:01 12 /tmp/_MEI1/libpython3.11.so.1.0\n"
        "7f02-7f03 rw-p 00000000 00:00 0 [heap]\n";
    EXPECT_TRUE(maps_below(maps, "/tmp/_MEI1"));
    EXPECT_FALSE(maps_below(maps, "/tmp/_MEI"));  // a prefix of the name is not the directory
    EXPECT_FALSE(maps_below(maps, "/tmp/_MEI1/libpython3.11.so.1.0"));
}

}  // namespace
}  // namespace gpuguard::agent
