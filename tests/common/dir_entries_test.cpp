// Directory listings through getdents64 (gpuguard/common/dir_entries.h):
// a fake tree for the parsing, the real /proc for the syscall on procfs.
#include "gpuguard/common/dir_entries.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"

namespace gpuguard {
namespace {

namespace fs = std::filesystem;

class DirEntriesTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("gg-dir-entries-" + std::to_string(getpid()) + "-" +
                testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    void touch(const std::string& name) { std::ofstream(dir_ / name) << "x"; }
    fs::path dir_;
};

TEST_F(DirEntriesTest, lists_every_entry_but_dot_and_dot_dot_with_its_type) {
    touch("file");
    fs::create_directory(dir_ / "sub");
    fs::create_symlink("file", dir_ / "link");
    auto entries = list_directory(dir_);
    ASSERT_TRUE(entries) << entries.error().message;
    std::map<std::string, unsigned char> types;
    for (const auto& entry : *entries) {
        types[entry.name] = entry.type;
        EXPECT_NE(entry.inode, 0u) << entry.name;
    }
    EXPECT_EQ(types, (std::map<std::string, unsigned char>{
                         {"file", DT_REG}, {"sub", DT_DIR}, {"link", DT_LNK}}));
}

TEST_F(DirEntriesTest, reads_a_directory_larger_than_one_buffer) {
    // ~5000 records of ~48 bytes: several getdents64 calls of 32 KiB each.
    std::set<std::string> made;
    for (int i = 0; i < 5000; ++i) {
        const std::string name = "entry-with-a-long-name-" + std::to_string(i);
        touch(name);
        made.insert(name);
    }
    auto entries = list_directory(dir_);
    ASSERT_TRUE(entries) << entries.error().message;
    std::set<std::string> listed;
    for (const auto& entry : *entries) listed.insert(entry.name);
    EXPECT_EQ(entries->size(), made.size());  // none twice
    EXPECT_EQ(listed, made);
}

TEST_F(DirEntriesTest, numbered_entries_are_the_decimal_names_ascending) {
    for (const char* name : {"42", "1", "self", "4294967295", "4294967296", "12x", "-3", "007"}) {
        fs::create_directory(dir_ / name);
    }
    auto numbers = list_numbered_entries(dir_);
    ASSERT_TRUE(numbers) << numbers.error().message;
    EXPECT_EQ(*numbers, (std::vector<uint32_t>{1, 7, 42, 4294967295u}));
}

TEST_F(DirEntriesTest, a_missing_directory_fails_naming_it) {
    auto entries = list_directory(dir_ / "missing");
    ASSERT_FALSE(entries);
    EXPECT_EQ(entries.error().code, ErrorCode::kNotFound);
    EXPECT_NE(entries.error().message.find((dir_ / "missing").string()), std::string::npos);
    touch("plain");
    EXPECT_EQ(list_numbered_entries(dir_ / "plain").error().code, ErrorCode::kNotFound);
}

TEST(DirEntriesProcTest, the_real_proc_lists_this_process_and_its_open_fds) {
    auto pids = list_numbered_entries("/proc");
    ASSERT_TRUE(pids) << pids.error().message;
    EXPECT_TRUE(std::binary_search(pids->begin(), pids->end(), static_cast<uint32_t>(getpid())));
    EXPECT_TRUE(std::binary_search(pids->begin(), pids->end(), 1u));
    const UniqueFd fd(::open("/proc/self/status", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    auto fds = list_numbered_entries("/proc/self/fd");
    ASSERT_TRUE(fds) << fds.error().message;
    EXPECT_TRUE(std::binary_search(fds->begin(), fds->end(), static_cast<uint32_t>(fd.get())));
}

}  // namespace
}  // namespace gpuguard
