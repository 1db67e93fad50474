// The real agent against GPU processes started with the library
// environments ML deployments really set (issue 36): NVIDIA's CUDA images,
// NGC, a conda environment, a virtualenv with pip's nvidia-* wheels, each
// below warning; a user's own old library directory a notice; a preload
// from /dev/shm and a library directory written just before, errors; and a
// GPU program reached through a symlink judged where its file is. Every
// child runs in a mount namespace of its own with tmpfs over /opt, /srv,
// /dev/shm and /var/tmp: the host's directories are never written. And a
// look-alike location (/var/tmp/_MEI*) exempt only when what it claims is so.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Subprocess;

class AgentEnvTest : public AgentDetectTest {
  protected:
    // A child in its own mount namespace: `setup` (shell) builds its files,
    // then it execs `run` with `env`; the program opens the GPU node, says
    // so with a file and sleeps as the same process.
    pid_t start(const std::string& name, const std::string& setup, const std::string& env,
                const std::string& run = "/bin/bash") {
        const auto mark = dir_ / (name + ".open");
        const std::string program =
            "exec 7<>" + node_.string() + "; : > " + mark.string() + "; exec /usr/bin/sleep 30";
        const std::string script =
            "mount --make-rprivate / || exit 3; "
            "for d in /opt /srv /dev/shm /var/tmp; do mount -t tmpfs gg-test $d || exit 4; done; " +
            setup + " || exit 5; exec /usr/bin/env " + env + " " + run + " -c '" + program + "'";
        return in_own_mounts(script, mark);
    }
    // Runs `script` (bash) in a mount namespace of its own; `mark` is the
    // file its program writes once it has opened the GPU node.
    pid_t in_own_mounts(const std::string& script, const std::filesystem::path& mark) {
        const pid_t pid = gpuguard::testing::spawn_process(
            "/usr/bin/unshare",
            {"unshare", "-m", "--propagation", "private", "/bin/bash", "-c", script}, "/",
            {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
        marks_[pid] = mark;
        return pid;
    }
    // Waits (bounded) until every child started so far has opened the GPU.
    bool all_opened() {
        for (int i = 0; i < 400; ++i) {
            bool all = true;
            for (const auto& [pid, mark] : marks_) all &= std::filesystem::exists(mark);
            if (all) return true;
            std::this_thread::sleep_for(25ms);
        }
        return false;
    }
    // A detection already read (the agent prints in the order it judges,
    // not the order the test asks), or the next one within `timeout`.
    std::optional<nlohmann::json> detection_of(Subprocess& agent, pid_t pid,
                                               const std::string& rule,
                                               std::chrono::milliseconds timeout) {
        for (const auto& line : seen_) {
            auto record = nlohmann::json::parse(line);
            if (record["rule"]["id"] == rule && record["process"]["pid"] == pid) return record;
        }
        return wait_for_detection(agent, pid, rule, timeout);
    }
    // The first `rule` detection of `pid` at `level` (an update included).
    bool reaches(Subprocess& agent, pid_t pid, const std::string& rule, const std::string& level,
                 std::chrono::milliseconds timeout) {
        const auto at_level = [&](const std::string& line) {
            const auto record = nlohmann::json::parse(line);
            return record["rule"]["id"] == rule && record["process"]["pid"] == pid &&
                   record["log"]["level"] == level;
        };
        if (std::any_of(seen_.begin(), seen_.end(), at_level)) return true;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (wait_for_detection(agent, pid, rule, 100ms) && at_level(seen_.back())) return true;
        }
        return false;
    }
    std::string level_of(const nlohmann::json& detection) const {
        return detection["log"]["level"].get<std::string>();
    }
    std::map<pid_t, std::filesystem::path> marks_;
};

TEST_F(AgentEnvTest, ml_environments_stay_below_warning_and_real_injection_is_an_error) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string old = "touch -d '30 days ago' ";
    // nvidia/cuda images: ENV LD_LIBRARY_PATH /usr/local/nvidia/lib:/usr/local/nvidia/lib64.
    const pid_t cuda =
        start("cuda", "true", "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64");
    // NGC images put CUDA's forward-compatibility libraries first.
    const pid_t ngc = start(
        "ngc", "true",
        "LD_LIBRARY_PATH=/usr/local/cuda/compat/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64");
    // A conda environment made a minute ago: conda-meta/ vouches for it.
    const pid_t conda = start("conda",
                              "mkdir -p /opt/conda/envs/ml/conda-meta /opt/conda/envs/ml/lib && "
                              ": > /opt/conda/envs/ml/lib/libcudart.so.12",
                              "LD_LIBRARY_PATH=/opt/conda/envs/ml/lib");
    // A virtualenv with pip's nvidia-cudnn and nvidia-cublas wheels.
    const std::string site = "/srv/venv/lib/python3.11/site-packages/nvidia";
    const pid_t venv =
        start("venv",
              "mkdir -p " + site + "/cudnn/lib " + site + "/cublas/lib && : > " + site +
                  "/cudnn/lib/libcudnn.so.9 && echo 'home = /usr/bin' > /srv/venv/pyvenv.cfg",
              "LD_LIBRARY_PATH=" + site + "/cudnn/lib:" + site + "/cublas/lib");
    // A user's own build of a library, a month old: nothing vouches, a notice.
    const pid_t own = start("own",
                            "mkdir -p /srv/alice/lib && : > /srv/alice/lib/libfoo.so && " + old +
                                "/srv/alice/lib/libfoo.so /srv/alice/lib",
                            "LD_LIBRARY_PATH=/srv/alice/lib");
    ASSERT_TRUE(all_opened()) << agent.stderr_text();

    // The miners': a preload dropped in /dev/shm, a library path written just now.
    const pid_t shm = start("shm", "mkdir -p /dev/shm/.x && : > /dev/shm/.x/libhook.so",
                            "LD_PRELOAD=/dev/shm/.x/libhook.so");
    const pid_t fresh =
        start("fresh", "mkdir -p /srv/bob/.cache/lib && : > /srv/bob/.cache/lib/libcuda.so.1",
              "LD_LIBRARY_PATH=/srv/bob/.cache/lib");
    // An old library only root can write, preloaded: a notice by itself,
    // until the agent's YARA scan of it finds XMRig's strings.
    const pid_t marked = start(
        "marked",
        "mkdir -p /srv/tools && cp /usr/bin/sleep /srv/tools/libprof.so && printf "
        "'\\0donate.v2.xmrig.com\\0--donate-level\\0XMRig/6.21\\0' >> /srv/tools/libprof.so && " +
            old + "/srv/tools/libprof.so",
        "LD_PRELOAD=/srv/tools/libprof.so");
    // A GPU program in /var/tmp started through a symlink in /srv.
    const pid_t linked =
        start("linked", "cp /bin/bash /var/tmp/gg-bash && ln -s /var/tmp/gg-bash /srv/run-bash",
              "GG=1", "/srv/run-bash");
    std::list<ChildReaper> reapers;  // not movable: a list never moves them
    for (pid_t pid : {cuda, ngc, conda, venv, own, shm, fresh, marked, linked}) {
        ASSERT_GT(pid, 0);
        reapers.emplace_back(pid);
    }
    ASSERT_TRUE(all_opened()) << agent.stderr_text();

    for (pid_t miner : {shm, fresh}) {
        auto detection = detection_of(agent, miner, "GG-CORR-0016", 10s);
        ASSERT_TRUE(detection) << miner << " " << agent.stderr_text();
        EXPECT_EQ(level_of(*detection), "error") << detection->dump();
    }
    EXPECT_TRUE(reaches(agent, marked, "GG-CORR-0016", "error", 10s))
        << "the YARA verdict on the preloaded library";
    auto location = detection_of(agent, linked, "GG-CORR-0005", 10s);
    ASSERT_TRUE(location) << "judged by its real path in /var/tmp";
    EXPECT_EQ(level_of(*location), "notice") << location->dump();
    EXPECT_NE(location->dump().find("/var/tmp/gg-bash"), std::string::npos) << location->dump();
    // The benign ones opened the GPU before the miners, so their judgement
    // was printed before the miners' (one pipeline, in order).
    bool own_noticed = false;
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        const pid_t pid = record["process"]["pid"].get<pid_t>();
        if (pid == cuda || pid == ngc || pid == conda || pid == venv) {
            ADD_FAILURE() << "an ML environment was reported: " << line;
        }
        if (pid == own) {
            own_noticed |= record["rule"]["id"] == "GG-CORR-0016";
            EXPECT_EQ(level_of(record), "notice") << line;
        }
    }
    EXPECT_TRUE(own_noticed) << "a library nothing vouches for is a notice";
    // Exactly these; the YARA verdict on the marked library raises its
    // notice to an error (the notice may come first).
    expect_whole_output(agent,
                        {{"GG-CORR-0016", shm, "error"},
                         {"GG-CORR-0016", fresh, "error"},
                         {"GG-CORR-0016", marked, "error"},
                         {"GG-CORR-0016", marked, "notice", /*optional=*/true},
                         // YARA's verdict on the library it preloads
                         {"GG-CORR-0004", marked, "critical"},
                         {"GG-CORR-0016", own, "notice"},
                         {"GG-CORR-0005", linked, "notice"}},
                        {cuda, ngc, conda, venv, own, shm, fresh, marked, linked});
}

// A look-alike location exempts only what its name claims (issue 38 point
// 6): a GPU program in /var/tmp/_MEI* that no PyInstaller program stands
// behind is judged as a /var/tmp one (GG-CORR-0005, the refusal in the
// evidence); the same program started by a program outside /var/tmp that
// holds a file of the directory open, as PyInstaller's bootloader child
// maps its unpacked libpython, is not reported.
TEST_F(AgentEnvTest, a_pyinstaller_look_alike_is_exempt_only_when_a_program_stands_behind_it) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // Each unpacks bash into its own /var/tmp (a tmpfs of its namespace);
    // the unpacked bash opens the GPU node, writes its pid and stays (a
    // read of a FIFO nobody writes: no child left holding the test's pipes).
    const auto start_unpacked = [&](const std::string& name, const std::string& holder) {
        const std::string dir = "/var/tmp/_MEI" + name;
        const auto mark = dir_ / (name + ".pid");
        const std::string program = "exec 7<>" + node_.string() + "; echo $$ > " + mark.string() +
                                    "; exec 9<>" + dir + "/wait; read -t 30 -u 9; true";
        const std::string script =
            "mount --make-rprivate / && mount -t tmpfs gg-test /var/tmp && mkdir " + dir +
            " && mkfifo " + dir + "/wait && cp /bin/bash " + dir + "/bash && : > " + dir +
            "/libpython3.11.so.1.0 && " + holder + dir + "/bash -c '" + program + "'; true";
        return in_own_mounts(script, mark);
    };
    // The real one first: its verdict is judged before the fake one's.
    const pid_t real_launcher =
        start_unpacked("real", "exec 3</var/tmp/_MEIreal/libpython3.11.so.1.0; ");
    const pid_t fake_launcher = start_unpacked("fake", "");
    ChildReaper reap_real(real_launcher), reap_fake(fake_launcher);
    ASSERT_TRUE(all_opened()) << agent.stderr_text();
    // The mark exists once the shell opened it for writing; the pid follows.
    const auto pid_in = [&](pid_t launcher) {
        pid_t pid = 0;
        for (int i = 0; i < 200 && pid <= 0; ++i) {
            std::ifstream(marks_[launcher]) >> pid;
            if (pid <= 0) std::this_thread::sleep_for(25ms);
        }
        return pid;
    };
    const pid_t real = pid_in(real_launcher), fake = pid_in(fake_launcher);
    ASSERT_GT(real, 0);
    ASSERT_GT(fake, 0);
    ChildReaper reap_real_program(real), reap_fake_program(fake);

    const auto location = detection_of(agent, fake, "GG-CORR-0005", 10s);
    ASSERT_TRUE(location) << agent.stderr_text();
    EXPECT_EQ(level_of(*location), "notice") << location->dump();
    const std::string text = location->dump();
    EXPECT_NE(text.find("/var/tmp/_MEIfake/bash (refused: PyInstaller: no ancestor outside a "
                        "temporary directory uses files from /var/tmp/_MEIfake)"),
              std::string::npos)
        << text;
    // The scans are answered in order: the real one's verdict came first.
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        EXPECT_NE(record["process"]["pid"].get<pid_t>(), real) << line;
    }
    expect_whole_output(agent, {{"GG-CORR-0005", fake, "notice"}},
                        {real, fake, real_launcher, fake_launcher});
}

}  // namespace
