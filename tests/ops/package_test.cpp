// The Debian package: `cpack -G DEB` builds it inside the build tree,
// lintian finds no error in it, and dpkg installs it into a scratch root
// (never the host's) and purges it from there without leaving the agent's
// state behind.
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::CommandResult;
using gpuguard::testing::run_command;
namespace fs = std::filesystem;

const fs::path kSourceDir = GPUGUARD_SOURCE_DIR;
const fs::path kWorkDir = GPUGUARD_BUILD_DIR "/packaging/package-test";

using gpuguard::testing::file_text;

std::string describe(const CommandResult& result) {
    return "exit " + std::to_string(result.exit_code) + "\n" + result.stdout_text +
           result.stderr_text;
}

class PackageTest : public ::testing::Test {
  protected:
    // One package for the whole suite: cpack strips and runs dpkg-shlibdeps.
    static fs::path& built_package() {
        static fs::path package;
        return package;
    }

    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        if (built_package().empty()) {
            fs::remove_all(kWorkDir);
            fs::create_directories(kWorkDir);
            // The binary is already built (a test dependency): cpack installs and packs.
            const auto built =
                run_command({"/usr/bin/cpack", "-G", "DEB", "--config",
                             GPUGUARD_BUILD_DIR "/CPackConfig.cmake", "-B", kWorkDir.string()},
                            300s);
            ASSERT_EQ(built.exit_code, 0) << describe(built);
            for (const auto& entry : fs::directory_iterator(kWorkDir)) {
                if (entry.path().extension() == ".deb") built_package() = entry.path();
            }
            ASSERT_FALSE(built_package().empty()) << describe(built);
        }
        package_ = built_package();
    }

    static void TearDownTestSuite() {
        std::error_code ec;
        fs::remove_all(kWorkDir, ec);
        built_package().clear();
    }

    // dpkg on a scratch root: maintainer scripts run outside a chroot with
    // DPKG_ROOT set (the root has no shell of its own); the package's
    // library dependencies are not installed there.
    CommandResult dpkg(const fs::path& root, std::vector<std::string> arguments) {
        std::vector<std::string> argv = {"/usr/bin/dpkg", "--root=" + root.string(),
                                         "--force-script-chrootless", "--force-depends",
                                         "--log=/dev/null"};
        argv.insert(argv.end(), arguments.begin(), arguments.end());
        return run_command(argv, 120s);
    }

    fs::path package_;
};

// The maintainer scripts themselves, without dpkg: on remove, prerm deletes
// the agent's nftables table through `gpuguard block flush --all` and
// postrm through nft when prerm could not; another table stays, and under
// DPKG_ROOT (an install into another root) nothing is touched. Inside a
// network namespace of its own, with a PATH holding only the tool each step
// may use (no systemd helper is reachable without DPKG_ROOT).
TEST(PackageScripts, remove_deletes_only_the_gpuguard_table_and_nothing_under_dpkg_root) {
    GG_REQUIRE_PRIVILEGED();
    const fs::path work = fs::temp_directory_path() / ("gg-scripts-" + std::to_string(getpid()));
    fs::remove_all(work);
    for (const char* dir : {"scratch", "gg-bin", "nft-bin", "both-bin"}) {
        fs::create_directories(work / dir);
    }
    for (const char* dir : {"gg-bin", "both-bin"}) {
        fs::create_symlink(GPUGUARD_BINARY, work / dir / "gpuguard");
    }
    for (const char* dir : {"nft-bin", "both-bin"}) {
        fs::create_symlink("/usr/sbin/nft", work / dir / "nft");
    }
    const std::string scripts = (kSourceDir / "packaging").string();
    const std::string w = work.string();
    const std::string script =
        "set -e\n"
        "/usr/sbin/nft add table inet gpuguard\n"
        "/usr/sbin/nft add table ip other\n"
        "echo '== dpkg_root'\n"
        "for step in 'prerm remove' 'postrm remove' 'postrm purge'; do\n"
        "  DPKG_ROOT=" +
        w + "/scratch PATH=" + w + "/both-bin:/usr/bin:/bin /bin/sh " + scripts +
        "/${step% *} ${step#* }\n"
        "done\n"
        "/usr/sbin/nft list tables\n"
        "echo '== prerm'\n"
        "PATH=" +
        w + "/gg-bin /bin/sh " + scripts +
        "/prerm remove\n"
        "/usr/sbin/nft list tables\n"
        "/usr/sbin/nft add table inet gpuguard\n"
        "echo '== postrm'\n"
        "PATH=" +
        w + "/nft-bin /bin/sh " + scripts +
        "/postrm remove\n"
        "/usr/sbin/nft list tables\n";
    const auto result = run_command({"/usr/bin/unshare", "-n", "/bin/sh", "-c", script}, 60s);
    fs::remove_all(work);
    ASSERT_EQ(result.exit_code, 0) << describe(result);
    EXPECT_EQ(result.stdout_text,
              "== dpkg_root\ntable inet gpuguard\ntable ip other\n"
              "== prerm\ntable ip other\n"
              "== postrm\ntable ip other\n")
        << describe(result);
}

TEST_F(PackageTest, control_fields_name_dependencies_conffiles_and_scripts) {
    const auto info = run_command({"/usr/bin/dpkg-deb", "--info", package_.string()});
    ASSERT_EQ(info.exit_code, 0) << describe(info);
    EXPECT_NE(info.stdout_text.find("Package: gpuguard"), std::string::npos) << info.stdout_text;
    EXPECT_NE(info.stdout_text.find("Section: admin"), std::string::npos);
    // dpkg-shlibdeps found the shared libraries the binary links.
    EXPECT_TRUE(std::regex_search(info.stdout_text, std::regex("Depends:.*libbpf1")))
        << info.stdout_text;
    EXPECT_TRUE(std::regex_search(info.stdout_text, std::regex("Depends:.*libsystemd0")));
    for (const char* member : {"conffiles", "postinst", "prerm", "postrm"}) {
        EXPECT_NE(info.stdout_text.find(member), std::string::npos) << member;
    }
    const auto contents = run_command({"/usr/bin/dpkg-deb", "--contents", package_.string()});
    ASSERT_EQ(contents.exit_code, 0);
    for (const char* path :
         {"./usr/sbin/gpuguard", "./lib/systemd/system/gpuguard.service",
          "./etc/gpuguard/gpuguard.yaml", "./etc/gpuguard/miner-rules.yaml",
          "./usr/share/man/man8/gpuguard.8.gz", "./usr/share/doc/gpuguard/copyright",
          "./usr/share/doc/gpuguard/changelog.gz", "./usr/share/doc/gpuguard/configuration.md",
          "./usr/share/doc/gpuguard/examples/grafana/gpuguard.json",
          "./usr/share/doc/gpuguard/examples/prometheus/gpuguard-alerts.yml",
          "./usr/share/gpuguard/signatures/xmrig.yaml"}) {
        EXPECT_NE(contents.stdout_text.find(path), std::string::npos) << path;
    }
    EXPECT_TRUE(std::regex_search(
        contents.stdout_text, std::regex("-rw-r----- root/root .* ./etc/gpuguard/gpuguard.yaml")))
        << "the config may hold sink tokens: not world-readable\n"
        << contents.stdout_text;
}

TEST_F(PackageTest, lintian_reports_no_errors_or_warnings) {
    // --fail-on warning: an error or a warning fails. Overrides, each with its
    // reason, are in packaging/lintian-overrides (passed here, shipped in the .deb).
    const auto lint = run_command({"/usr/bin/lintian", "--fail-on", "error,warning",
                                   "--tag-display-limit", "0", package_.string()},
                                  300s);
    EXPECT_EQ(lint.exit_code, 0) << describe(lint);
    EXPECT_EQ(lint.stdout_text.find("E: "), std::string::npos) << lint.stdout_text;
    EXPECT_EQ(lint.stdout_text.find("W: "), std::string::npos) << lint.stdout_text;
}

TEST_F(PackageTest, installs_into_a_scratch_root_and_purge_removes_everything) {
    const fs::path root = kWorkDir / "root";
    fs::remove_all(root);
    fs::create_directories(root / "var/lib/dpkg/info");
    fs::create_directories(root / "var/lib/dpkg/updates");
    std::ofstream(root / "var/lib/dpkg/status").flush();
    const bool host_state_existed = fs::exists("/var/lib/gpuguard");

    const auto installed = dpkg(root, {"--install", package_.string()});
    ASSERT_EQ(installed.exit_code, 0) << describe(installed);
    const auto status =
        run_command({"/usr/bin/dpkg-query", "--admindir=" + (root / "var/lib/dpkg").string(), "-W",
                     "-f=${db:Status-Status} ${Conffiles}\n", "gpuguard"});
    EXPECT_NE(status.stdout_text.find("installed"), std::string::npos) << describe(status);
    EXPECT_NE(status.stdout_text.find("/etc/gpuguard/gpuguard.yaml"), std::string::npos);
    EXPECT_NE(status.stdout_text.find("/etc/gpuguard/miner-rules.yaml"), std::string::npos)
        << describe(status);

    const fs::path binary = root / "usr/sbin/gpuguard";
    ASSERT_TRUE(fs::exists(binary));
    EXPECT_NE(fs::status(binary).permissions() & fs::perms::owner_exec, fs::perms::none);
    EXPECT_EQ(file_text(root / "lib/systemd/system/gpuguard.service"),
              file_text(kSourceDir / "packaging/gpuguard.service"));
    EXPECT_EQ(file_text(root / "etc/gpuguard/gpuguard.yaml"),
              file_text(kSourceDir / "agent/daemon/default_config.yaml"));
    EXPECT_TRUE(fs::is_directory(root / "etc/gpuguard/rules.d"));
    EXPECT_TRUE(fs::exists(root / "usr/share/man/man8/gpuguard.8.gz"));
    const auto man = run_command({"/bin/sh", "-c",
                                  "zcat '" + (root / "usr/share/man/man8/gpuguard.8.gz").string() +
                                      "' | MANWIDTH=80 man -l - 2>&1 | head -5"});
    EXPECT_TRUE(std::regex_search(man.stdout_text, std::regex("gpuguard +- GPU security agent")))
        << man.stdout_text;

    // The packaged (stripped) binary works and accepts the packaged config.
    const auto check = run_command(
        {binary.string(), "config", "check", (root / "etc/gpuguard/gpuguard.yaml").string()});
    EXPECT_EQ(check.exit_code, 0) << describe(check);
    EXPECT_NE(check.stdout_text.find("OK"), std::string::npos);

    // What a running agent leaves: journal segments, queues, local rules.
    fs::create_directories(root / "var/lib/gpuguard/journal/incidents");
    std::ofstream(root / "var/lib/gpuguard/journal/seg-0000000001.ggj") << "x";
    fs::create_directories(root / "var/lib/gpuguard/queue/siem");
    std::ofstream(root / "etc/gpuguard/rules.d/50-local.yaml") << "rules: []\n";

    // remove keeps configuration and state; purge removes both.
    const auto removed = dpkg(root, {"--remove", "gpuguard"});
    ASSERT_EQ(removed.exit_code, 0) << describe(removed);
    EXPECT_FALSE(fs::exists(binary));
    EXPECT_TRUE(fs::exists(root / "etc/gpuguard/gpuguard.yaml"));
    EXPECT_TRUE(fs::exists(root / "var/lib/gpuguard/journal"));
    const auto removed_state =
        run_command({"/usr/bin/dpkg-query", "--admindir=" + (root / "var/lib/dpkg").string(), "-W",
                     "-f=${db:Status-Status}\n", "gpuguard"});
    EXPECT_EQ(removed_state.stdout_text, "config-files\n") << describe(removed_state);

    const auto purged = dpkg(root, {"--purge", "gpuguard"});
    ASSERT_EQ(purged.exit_code, 0) << describe(purged);
    for (const char* path : {"usr/sbin/gpuguard", "lib/systemd/system/gpuguard.service",
                             "etc/gpuguard", "var/lib/gpuguard", "usr/share/doc/gpuguard",
                             "usr/share/gpuguard", "usr/share/man/man8/gpuguard.8.gz"}) {
        EXPECT_FALSE(fs::exists(root / path)) << path << " left after purge";
    }
    const auto after =
        run_command({"/usr/bin/dpkg-query", "--admindir=" + (root / "var/lib/dpkg").string(), "-W",
                     "-f=${db:Status-Status}\n", "gpuguard"});
    // Purged: dpkg forgets the package altogether.
    EXPECT_EQ(after.exit_code, 1) << describe(after);
    EXPECT_NE(after.stderr_text.find("no packages found matching gpuguard"), std::string::npos)
        << describe(after);
    EXPECT_EQ(fs::exists("/var/lib/gpuguard"), host_state_existed)
        << "the maintainer scripts touched the host";
}

}  // namespace
