// Trusted files: the agent's config and rule files must be writable by
// their required owner only; the check is on the opened file.
#include "gpuguard/common/trusted_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuguard {
namespace {

class TrustedFileTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char name[] = "/tmp/gpuguard-trusted-XXXXXX";
        ASSERT_NE(mkdtemp(name), nullptr);
        dir_ = name;
        file_ = dir_ / "rules.yaml";
        std::ofstream(file_) << "rules: []\n";
        std::filesystem::permissions(file_, std::filesystem::perms(0644));
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::filesystem::path dir_;
    std::filesystem::path file_;
    const uid_t me_ = geteuid();
};

TEST(TrustProblem, names_group_and_other_write_and_a_foreign_owner) {
    struct stat st {};
    st.st_uid = 0;
    st.st_gid = 0;
    st.st_mode = S_IFREG | 0644;
    EXPECT_EQ(trust_problem(st, 0), "");
    st.st_mode = S_IFREG | 0664;
    EXPECT_EQ(trust_problem(st, 0).rfind("writable by group (mode 0664, owner ", 0), 0u)
        << trust_problem(st, 0);
    st.st_mode = S_IFREG | 0646;
    EXPECT_EQ(trust_problem(st, 0).rfind("writable by others (mode 0646", 0), 0u);
    st.st_mode = S_IFREG | 0666;
    EXPECT_EQ(trust_problem(st, 0).rfind("writable by group and others (mode 0666", 0), 0u);
    st.st_mode = S_IFDIR | 01777;  // /tmp-like: the sticky bit does not make it the agent's
    EXPECT_NE(trust_problem(st, 0), "");
    st.st_mode = S_IFREG | 0600;
    st.st_uid = 4242;
    EXPECT_EQ(trust_problem(st, 0).rfind("owned by ", 0), 0u) << trust_problem(st, 0);
}

TEST_F(TrustedFileTest, reads_a_file_only_its_owner_can_write) {
    auto text = read_trusted_file(file_, me_);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(*text, "rules: []\n");
}

TEST_F(TrustedFileTest, refuses_a_group_writable_file_in_one_line_naming_it) {
    std::filesystem::permissions(file_, std::filesystem::perms(0664));
    auto text = read_trusted_file(file_, me_);
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, ErrorCode::kPermission);
    const std::string& message = text.error().message;
    EXPECT_EQ(message.rfind(file_.string() + ": writable by group (mode 0664, owner ", 0), 0u)
        << message;
    EXPECT_NE(message.find("): refused; make it writable by "), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_EQ(text.error().sys_errno, 0);  // callers pass it on as it is
}

TEST_F(TrustedFileTest, refuses_a_file_someone_else_owns) {
    auto text = read_trusted_file(file_, me_ + 1);
    ASSERT_FALSE(text);
    EXPECT_NE(text.error().message.find(": owned by "), std::string::npos) << text.error().message;
    EXPECT_NE(text.error().message.find("make it owned by uid "), std::string::npos)
        << text.error().message;
}

TEST_F(TrustedFileTest, without_a_required_owner_anything_readable_is_read) {
    std::filesystem::permissions(file_, std::filesystem::perms(0666));
    EXPECT_TRUE(read_trusted_file(file_, std::nullopt));
}

TEST_F(TrustedFileTest, a_missing_file_is_not_found) {
    auto text = read_trusted_file(dir_ / "missing.yaml", me_);
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, ErrorCode::kNotFound);
    EXPECT_NE(text.error().sys_errno, 0);
}

TEST_F(TrustedFileTest, lists_a_trusted_directory_and_refuses_an_open_one) {
    std::ofstream(dir_ / "b.yaml") << "";
    std::ofstream(dir_ / "a.txt") << "";
    std::filesystem::permissions(dir_, std::filesystem::perms(0755));
    auto listed = list_trusted_directory(
        dir_, [](const std::string& name) { return name.ends_with(".yaml"); }, me_);
    ASSERT_TRUE(listed) << listed.error().message;
    ASSERT_EQ(listed->size(), 2u);
    EXPECT_EQ((*listed)[0], dir_ / "b.yaml");
    EXPECT_EQ((*listed)[1], file_);

    std::filesystem::permissions(dir_, std::filesystem::perms(0777));
    listed = list_trusted_directory(
        dir_, [](const std::string&) { return true; }, me_);
    ASSERT_FALSE(listed);
    EXPECT_EQ(listed.error().message.rfind(dir_.string() + ": writable by group and others", 0), 0u)
        << listed.error().message;
}

}  // namespace
}  // namespace gpuguard
