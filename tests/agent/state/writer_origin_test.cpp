// Who wrote one of the agent's trusted files (gpuguard/state/writer_origin.h):
// the package manager or systemctl when the writer or an ancestor runs one
// whose executable is vouched for, never on a name alone.
#include "gpuguard/state/writer_origin.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuguard::agent {
namespace {

// Vouches for what lies in /usr/bin, as a package database would.
std::string usr_bin_is_packaged(const Ancestor& process) {
    return process.exe.starts_with("/usr/bin/") ? "dpkg:test" : "";
}

TEST(WriterOrigin, a_maintainer_script_under_dpkg_is_the_package_manager) {
    const std::vector<Ancestor> chain = {{300, "/usr/bin/bash", "postinst"},
                                         {200, "/usr/bin/dpkg", "dpkg"},
                                         {100, "/usr/bin/apt", "apt"}};
    const WriterOrigin origin = classify_writer(chain, usr_bin_is_packaged);
    EXPECT_EQ(origin.kind, "package_manager");
    EXPECT_EQ(origin.detail, "under /usr/bin/dpkg (pid 200, dpkg:test)");
}

TEST(WriterOrigin, systemctl_itself_and_a_plain_shell) {
    EXPECT_EQ(classify_writer({{10, "/usr/bin/systemctl", "systemctl"}}, usr_bin_is_packaged).kind,
              "systemctl");
    const WriterOrigin shell = classify_writer(
        {{10, "/usr/bin/bash", "bash"}, {9, "/usr/sbin/sshd", "sshd"}}, usr_bin_is_packaged);
    EXPECT_EQ(shell.kind, "other");
    EXPECT_EQ(shell.detail, "");
}

TEST(WriterOrigin, a_tool_name_nothing_vouches_for_is_other_and_says_why) {
    const WriterOrigin origin = classify_writer(
        {{10, "/usr/bin/bash", "sh"}, {9, "/tmp/x/dpkg", "dpkg"}}, usr_bin_is_packaged);
    EXPECT_EQ(origin.kind, "other");
    EXPECT_EQ(origin.detail, "named dpkg, but /tmp/x/dpkg is owned by no package");
    EXPECT_EQ(writer_tool_kind("/usr/bin/rpm"), "package_manager");
    EXPECT_EQ(writer_tool_kind("/usr/bin/dpkg (deleted)"), "package_manager");
    EXPECT_EQ(writer_tool_kind("/usr/bin/dpkgx"), "");
}

TEST(WriterOrigin, a_live_process_is_read_from_proc) {
    const WriterOrigin self = writer_origin(static_cast<uint32_t>(getpid()));
    EXPECT_FALSE(self.exe.empty());
    ASSERT_FALSE(self.cmdline.empty());
    EXPECT_EQ(self.kind, "other");  // the test binary, under whatever ran it
}

}  // namespace
}  // namespace gpuguard::agent
