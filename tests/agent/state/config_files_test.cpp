// Config files of real child processes: which files a process names or its
// miner family reads, and what the reader refuses (procfs, devices, FIFOs)
// and cuts (oversize files). No root needed: the children are the test's.
#include "gpuguard/state/config_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

// A copy of the idle helper in `dir`/bin, named python3, started in `cwd`.
class ConfigFilesTest : public ::testing::Test {
  protected:
    pid_t start(const std::vector<std::string>& args, const fs::path& cwd,
                const std::vector<std::string>& env = {}) {
        const fs::path exe = dir_ / "bin" / "python3";
        if (!fs::exists(exe)) {
            fs::create_directories(exe.parent_path());
            fs::copy_file(GPUGUARD_IDLE_PROCESS, exe);
        }
        std::vector<std::string> argv{"python3"};
        argv.insert(argv.end(), args.begin(), args.end());
        const pid_t pid = testing::spawn_process(exe, argv, cwd, env);
        EXPECT_GT(pid, 0) << std::strerror(errno);
        reapers_.push_back(std::make_unique<testing::ChildReaper>(pid));
        return pid;
    }

    ConfigContext context(pid_t pid) {
        auto read = read_config_context(static_cast<uint32_t>(pid));
        EXPECT_TRUE(read) << read.error().message;
        return read ? *read : ConfigContext{};
    }

    // Every candidate of `pid` that opens, by path.
    std::vector<std::pair<std::string, std::string>> opened(pid_t pid) {
        const ConfigContext seen = context(pid);
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& candidate : config_candidates(seen)) {
            auto file = open_config_file(static_cast<uint32_t>(pid), candidate, seen.cwd);
            if (file) out.emplace_back(file->path(), candidate.reason);
        }
        return out;
    }

    testing::TempDir dir_{"gg-config-files"};
    std::vector<std::unique_ptr<testing::ChildReaper>> reapers_;
};

TEST_F(ConfigFilesTest, ConfigBesideTheExecutableAndInTheWorkingDirectoryAreFound) {
    write(dir_ / "bin" / "config.json", "{\"donate-level\": 1}\n");
    write(dir_ / "work" / "config.json", "{\"pools\": []}\n");
    const pid_t pid = start({}, dir_ / "work");
    const ConfigContext seen = context(pid);
    EXPECT_EQ(seen.exe, (dir_ / "bin" / "python3").string());
    EXPECT_EQ(seen.cwd, (dir_ / "work").string());
    const auto files = opened(pid);
    const std::vector<std::pair<std::string, std::string>> expected{
        {(dir_ / "bin" / "config.json").string(), "default"},
        {(dir_ / "work" / "config.json").string(), "default"}};
    EXPECT_EQ(files, expected);

    bool truncated = true;
    auto file = open_config_file(static_cast<uint32_t>(pid), {"config.json", "default"}, seen.cwd);
    ASSERT_TRUE(file) << file.error().message;
    auto text = file->read(1024, truncated);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(*text, "{\"pools\": []}\n");
    EXPECT_FALSE(truncated);
    EXPECT_EQ(file->version().size, text->size());
}

TEST_F(ConfigFilesTest, ArgumentsNameFilesAbsoluteOrRelativeToTheWorkingDirectory) {
    write(dir_ / "work" / "conf" / "a.json", "a");
    write(dir_ / "etc" / "b.json", "b");
    write(dir_ / "work" / "c.json", "c");
    const std::string absolute = (dir_ / "etc" / "b.json").string();
    const pid_t pid =
        start({"-c", "conf/a.json", "--config=" + absolute, "config=c.json", "--algo", "rx/0"},
              dir_ / "work");
    const auto candidates = config_candidates(context(pid));
    ASSERT_GE(candidates.size(), 3u);
    EXPECT_EQ(candidates[0], (ConfigCandidate{"conf/a.json", "argument"}));
    EXPECT_EQ(candidates[1], (ConfigCandidate{absolute, "argument"}));
    EXPECT_EQ(candidates[2], (ConfigCandidate{"c.json", "argument"}));
    const auto files = opened(pid);
    const std::vector<std::pair<std::string, std::string>> expected{
        {(dir_ / "work" / "conf" / "a.json").string(), "argument"},
        {absolute, "argument"},
        {(dir_ / "work" / "c.json").string(), "argument"}};
    EXPECT_EQ(files, expected);
}

TEST_F(ConfigFilesTest, HomeDefaultsComeFromTheProcesssEnvironment) {
    write(dir_ / "home" / ".xmrig.json", "{}");
    write(dir_ / "home" / ".config" / "xmrig.json", "{}");
    const pid_t pid = start({}, dir_.path(), {"HOME=" + (dir_ / "home").string()});
    const auto files = opened(pid);
    const std::vector<std::pair<std::string, std::string>> expected{
        {(dir_ / "home" / ".xmrig.json").string(), "default"},
        {(dir_ / "home" / ".config" / "xmrig.json").string(), "default"}};
    EXPECT_EQ(files, expected);
}

TEST_F(ConfigFilesTest, ProcfsDevicesAndFifosAreRefusedWithoutBlocking) {
    fs::create_directories(dir_ / "work");
    fs::create_symlink("/proc/self/environ", dir_ / "work" / "config.json");
    fs::create_symlink("/dev/zero", dir_ / "work" / "config.ini");
    ASSERT_EQ(mkfifo((dir_ / "work" / "pools.txt").c_str(), 0600), 0);
    fs::create_symlink("/sys/kernel/uevent_seqnum", dir_ / "work" / "cpu.txt");
    const pid_t pid = start({}, dir_ / "work");
    const std::string cwd = context(pid).cwd;
    const auto refused = [&](const std::string& name) {
        auto file = open_config_file(static_cast<uint32_t>(pid), {name, "default"}, cwd);
        EXPECT_FALSE(file) << name << " was opened";
        return file ? std::string() : file.error().message;
    };
    EXPECT_NE(refused("config.json").find("procfs"), std::string::npos);
    EXPECT_NE(refused("config.ini").find("not a regular file"), std::string::npos);
    EXPECT_NE(refused("pools.txt").find("not a regular file"), std::string::npos);
    EXPECT_NE(refused("cpu.txt").find("sysfs"), std::string::npos);
    EXPECT_TRUE(opened(pid).empty());
}

TEST_F(ConfigFilesTest, SymlinksResolveInsideTheProcesssRootAndMagicLinksAreNotFollowed) {
    write(dir_ / "real" / "config.json", "{}");
    fs::create_directories(dir_ / "work");
    fs::create_symlink(dir_ / "real" / "config.json", dir_ / "work" / "config.json");
    // A magic link (to the reader's own executable, a regular file) is never followed
    // (RESOLVE_NO_MAGICLINKS; RESOLVE_IN_ROOT alone refuses them too on kernels so far).
    fs::create_symlink("/proc/self/exe", dir_ / "work" / "config.txt");
    const pid_t pid = start({}, dir_ / "work");
    const std::string cwd = context(pid).cwd;
    auto file = open_config_file(static_cast<uint32_t>(pid), {"config.json", "default"}, cwd);
    ASSERT_TRUE(file) << file.error().message;
    EXPECT_EQ(file->path(), (dir_ / "work" / "config.json").string());
    EXPECT_FALSE(open_config_file(static_cast<uint32_t>(pid), {"config.txt", "default"}, cwd));
}

TEST_F(ConfigFilesTest, OversizeFileIsCutAndSaysSo) {
    write(dir_ / "work" / "config.json", std::string(10000, 'x'));
    const pid_t pid = start({}, dir_ / "work");
    auto file =
        open_config_file(static_cast<uint32_t>(pid), {"config.json", "default"}, context(pid).cwd);
    ASSERT_TRUE(file) << file.error().message;
    bool truncated = false;
    auto text = file->read(4096, truncated);
    ASSERT_TRUE(text);
    EXPECT_EQ(text->size(), 4096u);
    EXPECT_TRUE(truncated);
    EXPECT_EQ(file->version().size, 10000u);
    text = file->read(10000, truncated);
    ASSERT_TRUE(text);
    EXPECT_EQ(text->size(), 10000u);
    EXPECT_FALSE(truncated) << "exactly the limit is whole";
}

TEST_F(ConfigFilesTest, MissingFilesGiveNothing) {
    fs::create_directories(dir_ / "work");
    const pid_t pid = start({"-c", "absent.json"}, dir_ / "work");
    EXPECT_TRUE(opened(pid).empty());
    auto file =
        open_config_file(static_cast<uint32_t>(pid), {"absent.json", "argument"}, context(pid).cwd);
    ASSERT_FALSE(file);
    EXPECT_EQ(file.error().code, ErrorCode::kNotFound);
}

TEST(ConfigCandidates, EveryFamilysDefaultsOnceAndUnusableArgumentsSkipped) {
    ConfigContext context;
    context.exe = "/opt/m/nanominer (deleted)";
    context.argv = {"nanominer", "rig.ini", "-c", "", "--config", std::string("a\nb")};
    context.home = "/home/u";
    const auto candidates = config_candidates(context);
    const auto has = [&](const std::string& path, const std::string& reason) {
        return std::find(candidates.begin(), candidates.end(), ConfigCandidate{path, reason}) !=
               candidates.end();
    };
    EXPECT_TRUE(has("rig.ini", "argument")) << "nanominer's first argument";
    EXPECT_EQ(std::count_if(candidates.begin(), candidates.end(),
                            [](const ConfigCandidate& c) { return c.reason == "argument"; }),
              1);
    EXPECT_TRUE(has("/opt/m/config.json", "default"));
    EXPECT_TRUE(has("/opt/m/epools.txt", "default"));
    EXPECT_TRUE(has("/opt/m/cpuminer-conf.json", "default"));
    EXPECT_TRUE(has("config.json", "default"));
    EXPECT_TRUE(has("pools.txt", "default"));
    EXPECT_TRUE(has("/home/u/.config/xmrig.json", "default"));
    EXPECT_FALSE(has("", "argument"));
    EXPECT_FALSE(has("a\nb", "argument"));
    for (size_t i = 0; i < candidates.size(); ++i) {
        for (size_t j = i + 1; j < candidates.size(); ++j) {
            EXPECT_NE(candidates[i].path, candidates[j].path);
        }
    }
    // Renamed, its plain arguments named like configuration files still are.
    context.exe = "/srv/app/svc-worker";
    context.argv = {"svc-worker", "rig.ini",       "train.py",
                    "--x=y.json", "key=pools.txt", "conf/Pools.JSON"};
    std::vector<ConfigCandidate> arguments;
    for (const auto& candidate : config_candidates(context)) {
        if (candidate.reason == "argument") arguments.push_back(candidate);
    }
    EXPECT_EQ(arguments, (std::vector<ConfigCandidate>{{"rig.ini", "argument"},
                                                       {"conf/Pools.JSON", "argument"}}));
    // A memfd executable has no directory to look in.
    context.exe = "/memfd:x (deleted)";
    context.argv = {"x"};
    for (const auto& candidate : config_candidates(context)) {
        EXPECT_FALSE(candidate.path.starts_with("/memfd")) << candidate.path;
    }
}

}  // namespace
}  // namespace gpuguard::agent
