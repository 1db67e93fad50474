// The control socket: root-only, one request, one answer; refuses to displace
// a live agent, replaces a stale socket file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/daemon/control_socket.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

class ControlSocketTest : public ::testing::Test {
  protected:
    void SetUp() override { GG_REQUIRE_PRIVILEGED(); }
    gpuguard::testing::TempDir dir_{"gg-control"};
    std::filesystem::path path() const { return dir_ / "run" / "control.sock"; }
};

TEST_F(ControlSocketTest, answers_requests_with_the_handler) {
    auto server = ControlServer::start(path(), [](const std::string& command) {
        return nlohmann::json{{"echo", command}}.dump();
    });
    ASSERT_TRUE(server.ok()) << server.error().message;
    for (const char* command : {"status", "ps", "ping"}) {
        auto answer = control_request(path(), command);
        ASSERT_TRUE(answer.ok()) << answer.error().message;
        EXPECT_EQ(nlohmann::json::parse(answer.value())["echo"], command);
    }
    struct stat st {};
    ASSERT_EQ(stat(path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(stat(path().parent_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(ControlSocketTest, socket_file_is_removed_on_stop) {
    {
        auto server = ControlServer::start(path(), [](const std::string&) { return "{}"; });
        ASSERT_TRUE(server.ok());
        EXPECT_TRUE(std::filesystem::exists(path()));
    }
    EXPECT_FALSE(std::filesystem::exists(path()));
    auto answer = control_request(path(), "status");
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.error().code, ErrorCode::kNotFound);
    EXPECT_NE(answer.error().message.find("gpuguard run"), std::string::npos);
}

TEST_F(ControlSocketTest, second_agent_on_the_same_socket_is_refused) {
    auto first = ControlServer::start(path(), [](const std::string&) { return R"({"ok":true})"; });
    ASSERT_TRUE(first.ok());
    auto second = ControlServer::start(path(), [](const std::string&) { return "{}"; });
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.error().message.find("another gpuguard agent"), std::string::npos);
    EXPECT_TRUE(control_request(path(), "ping").ok()) << "the first one keeps serving";
}

TEST_F(ControlSocketTest, stale_socket_file_is_replaced) {
    std::filesystem::create_directories(path().parent_path());
    const int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path().c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(bind(stale, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    close(stale);  // the file stays, nobody listens: a crashed agent's leftover
    auto server = ControlServer::start(path(), [](const std::string&) { return R"({"ok":1})"; });
    ASSERT_TRUE(server.ok()) << server.error().message;
    EXPECT_TRUE(control_request(path(), "ping").ok());
}

TEST_F(ControlSocketTest, non_root_client_is_refused) {
    auto server =
        ControlServer::start(path(), [](const std::string&) { return R"({"secret":1})"; });
    ASSERT_TRUE(server.ok());
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        auto answer = control_request(path(), "status");
        _exit(answer.ok() ? 1 : (answer.error().code == ErrorCode::kPermission ? 0 : 2));
    }
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: answered a non-root client, 2: wrong error";
}

TEST_F(ControlSocketTest, malformed_request_gets_an_error_not_a_crash) {
    auto server = ControlServer::start(path(), [](const std::string&) { return R"({"ok":1})"; });
    ASSERT_TRUE(server.ok());
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path().c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const std::string garbage = "\x01\x02 not json\n";
    ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    char buffer[256] = {};
    ASSERT_GT(read(fd, buffer, sizeof(buffer) - 1), 0);
    close(fd);
    EXPECT_NE(std::string(buffer).find("bad request"), std::string::npos);
    EXPECT_TRUE(control_request(path(), "ping").ok());
}

}  // namespace
}  // namespace gpuguard::agent
