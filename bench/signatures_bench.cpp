// Command-line matching with the whole signature pack: Hyperscan (one
// database, what the agent uses) against the two usual baselines, a loop of
// std::regex_search and a loop of PCRE2 JIT matches, over the same generated
// corpus in the same run. Prints throughput, ratios, compile time and memory,
// and checks that all three find exactly the same (line, signature) hits.
//
//   BM_Signatures_hyperscan   every line through Matcher's cmdline database
//   BM_Signatures_pcre2_jit   every line through each pattern, JIT-compiled
//   BM_Signatures_std_regex   a sample of lines (--regex-lines) through each
//                             pattern (the full corpus would take minutes)
//
// Usage: signatures_bench [--lines=N] [--regex-lines=N] [--seed=N]
#define PCRE2_CODE_UNIT_WIDTH 8
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <pcre2.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/signatures/signatures.h"

namespace {

using Clock = std::chrono::steady_clock;
using gpuguard::signatures::Field;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

long rss_kb() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return 0;
}

// A deterministic mix: ~90 % command lines of a GPU host's ordinary work,
// ~10 % miner-like ones (named, renamed, base64 droppers, pools).
std::vector<std::string> make_corpus(size_t lines, uint32_t seed) {
    std::mt19937 rng(seed);
    auto pick = [&](const std::vector<std::string>& options) -> const std::string& {
        return options[rng() % options.size()];
    };
    auto number = [&](int low, int high) {
        return std::to_string(low +
                              static_cast<int>(rng() % static_cast<uint32_t>(high - low + 1)));
    };
    const std::vector<std::string> users = {"alice", "bob", "ml-svc", "render", "ci"};
    const std::vector<std::string> datasets = {"imagenet", "coco", "librispeech", "wiki103",
                                               "laion"};
    const std::vector<std::string> hosts = {"gitlab.internal", "10.0.3.17", "db-2.prod",
                                            "s3.amazonaws.com", "registry.example.org"};
    const std::vector<std::string> pools = {"pool.supportxmr.com",      "gulf.moneroocean.stream",
                                            "rvn.2miners.com",          "xmr-eu1.nanopool.org",
                                            "kawpow.auto.nicehash.com", "45.9.148.21"};
    std::vector<std::string> corpus;
    corpus.reserve(lines);
    for (size_t i = 0; i < lines; ++i) {
        const std::string user = pick(users);
        std::string line;
        switch (rng() % 20) {
            case 0:
                line = "python3 /home/" + user + "/proj/train.py --epochs " + number(1, 300) +
                       " --batch-size " + number(8, 512) + " --lr 0.00" + number(1, 9) +
                       " --data /data/" + pick(datasets) + " --cuda --amp";
                break;
            case 1:
                line = "torchrun --nproc_per_node=" + number(1, 8) +
                       " --master_port=" + number(20000, 30000) + " train.py --config configs/" +
                       pick(datasets) + ".yaml";
                break;
            case 2:
                line = "/usr/bin/ssh -o ServerAliveInterval=30 -o StrictHostKeyChecking=no " +
                       user + "@" + pick(hosts) + " -p " + number(22, 2222);
                break;
            case 3:
                line = "nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv -l " +
                       number(1, 10);
                break;
            case 4:
                line =
                    "/opt/conda/bin/python -m jupyterlab --ip=0.0.0.0 --port=8888 --no-browser "
                    "--NotebookApp.token=" +
                    number(100000, 999999);
                break;
            case 5:
                line = "ffmpeg -hwaccel cuda -i /srv/in/clip" + number(1, 999) +
                       ".mp4 -c:v h264_nvenc -b:v " + number(1, 20) + "M /srv/out/clip.mp4";
                break;
            case 6:
                line = "blender -b /render/scene" + number(1, 99) +
                       ".blend -E CYCLES -a -- --cycles-device CUDA";
                break;
            case 7:
                line = "docker run --rm --gpus all -v /data:/data -e NVIDIA_VISIBLE_DEVICES=" +
                       number(0, 7) + " nvcr.io/nvidia/pytorch:24.0" + number(1, 9) + "-py3";
                break;
            case 8:
                line = "curl -fsSL https://" + pick(hosts) + "/api/v1/jobs/" + number(1, 99999) +
                       " -H 'Authorization: Bearer x' -o /tmp/job.json";
                break;
            case 9:
                line = "gcc -O2 -Wall -c src/module" + number(1, 99) + ".c -o build/module.o";
                break;
            case 10:
                line = "java -Xmx" + number(1, 32) +
                       "g -jar /opt/app/service.jar --server.port=" + number(8000, 9000);
                break;
            case 11:
                line = "/usr/sbin/sshd -D -o AuthorizedKeysCommand=/usr/bin/sss_ssh_authorizedkeys";
                break;
            case 12:
                line = "tritonserver --model-repository=/models --http-port=" + number(8000, 8100) +
                       " --grpc-port=8001 --metrics-port=8002";
                break;
            case 13:
                line =
                    "bash -c cd /home/" + user + "/build && make -j" + number(2, 64) + " install";
                break;
            case 14:
                line = "rsync -az --delete /data/" + pick(datasets) + "/ " + pick(hosts) +
                       ":/backup/" + pick(datasets) + "/";
                break;
            case 15:
                line = "node /srv/web/server.js --port " + number(3000, 3999) + " --env production";
                break;
            case 16:
                line = "vllm serve meta-llama/Llama-3-8B --tensor-parallel-size " + number(1, 8) +
                       " --port " + number(8000, 8100);
                break;
            case 17:  // miner-like: named, with a pool
                line = "./xmrig -o " + pick(pools) + ":" + number(3333, 3339) +
                       " -u "
                       "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2V"
                       "BBEt7f2wfn3RVGQBEP3A"
                       " -k --tls --donate-level " +
                       number(0, 5);
                break;
            case 18:  // miner-like: renamed GPU miner
                line = "/tmp/.x/kworker -a kawpow -o stratum+tcp://" + pick(pools) + ":" +
                       number(4000, 9999) + " -u RWallet" + number(1000, 9999) + ".rig" +
                       number(1, 99) + " -p x --api-bind-http 0";
                break;
            default:  // miner-like: base64 dropper
                line =
                    "sh -c echo eG1yaWcgLW8gc3RyYXR1bSt0Y3A6Ly9wb29sLmV4YW1wbGU6MzMzMyAtdSB4"
                    " | base64 -d | sh #" +
                    number(1, 999999);
                break;
        }
        corpus.push_back(std::move(line));
    }
    return corpus;
}

struct Hits {
    size_t lines_matched = 0;
    size_t pairs = 0;  // (line, signature) hits
    std::vector<std::set<std::string>> per_line;
};

void record(Hits& hits, std::set<std::string> ids) {
    if (!ids.empty()) ++hits.lines_matched;
    hits.pairs += ids.size();
    hits.per_line.push_back(std::move(ids));
}

struct Throughput {
    double seconds = 0;
    size_t lines = 0;
    size_t bytes = 0;
    double lines_per_s() const { return seconds > 0 ? lines / seconds : 0; }
    double mb_per_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

}  // namespace

int main(int argc, char** argv) {
    size_t lines = 100000;
    size_t regex_lines = 5000;
    uint32_t seed = 42;
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--lines=", 8) == 0) {
            lines = std::strtoul(argv[i] + 8, nullptr, 10);
        } else if (std::strncmp(argv[i], "--regex-lines=", 14) == 0) {
            regex_lines = std::strtoul(argv[i] + 14, nullptr, 10);
        } else if (std::strncmp(argv[i], "--seed=", 7) == 0) {
            seed = static_cast<uint32_t>(std::strtoul(argv[i] + 7, nullptr, 10));
        } else {
            std::fprintf(stderr,
                         "usage: signatures_bench [--lines=N] [--regex-lines=N] [--seed=N]\n");
            return 2;
        }
    }
    gpuguard::set_log_level("warn");
    regex_lines = std::min(regex_lines, lines);
    const auto corpus = make_corpus(lines, seed);
    size_t corpus_bytes = 0;
    for (const auto& line : corpus) corpus_bytes += line.size();

    // Compile: the whole pack (every field) as the agent does, plus YARA.
    auto pack = gpuguard::signatures::load_builtin_pack();
    if (!pack) {
        std::fprintf(stderr, "signatures_bench: %s\n", pack.error().message.c_str());
        return 1;
    }
    const long rss_before = rss_kb();
    auto start = Clock::now();
    auto matcher = gpuguard::signatures::Matcher::compile(pack->signatures);
    const double hs_compile_s = seconds_since(start);
    const long rss_after = rss_kb();
    start = Clock::now();
    auto yara = gpuguard::signatures::YaraScanner::compile(*pack);
    const double yara_compile_s = seconds_since(start);
    if (!matcher || !yara) {
        std::fprintf(stderr, "signatures_bench: %s\n",
                     (!matcher ? matcher.error() : yara.error()).message.c_str());
        return 1;
    }
    const auto expressions = matcher->expressions(Field::kCmdline);

    // Baselines compiled from the very same expressions.
    start = Clock::now();
    std::vector<std::regex> std_regexes;
    for (const auto& expression : expressions) {
        auto flags = std::regex::ECMAScript | std::regex::optimize;
        if (expression.caseless) flags |= std::regex::icase;
        std_regexes.emplace_back(expression.expression, flags);
    }
    const double std_compile_s = seconds_since(start);

    start = Clock::now();
    std::vector<pcre2_code*> pcre_codes;
    size_t pcre_bytes = 0;
    for (const auto& expression : expressions) {
        int error = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* code = pcre2_compile(
            reinterpret_cast<PCRE2_SPTR>(expression.expression.c_str()), PCRE2_ZERO_TERMINATED,
            expression.caseless ? PCRE2_CASELESS : 0, &error, &offset, nullptr);
        if (!code || pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) {
            std::fprintf(stderr, "signatures_bench: PCRE2 rejects %s\n",
                         expression.expression.c_str());
            return 1;
        }
        size_t size = 0, jit_size = 0;
        pcre2_pattern_info(code, PCRE2_INFO_SIZE, &size);
        pcre2_pattern_info(code, PCRE2_INFO_JITSIZE, &jit_size);
        pcre_bytes += size + jit_size;
        pcre_codes.push_back(code);
    }
    const double pcre_compile_s = seconds_since(start);
    pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);

    // BM_Signatures_hyperscan
    auto scanner = matcher->scanner();
    if (!scanner) return 1;
    Hits hs_hits;
    hs_hits.per_line.reserve(lines);
    std::vector<std::string_view> ids;
    Throughput hs{0, lines, corpus_bytes};
    start = Clock::now();
    for (const auto& line : corpus) {
        scanner->match_into(Field::kCmdline, line, ids);
        record(hs_hits, std::set<std::string>(ids.begin(), ids.end()));
    }
    hs.seconds = seconds_since(start);

    // BM_Signatures_pcre2_jit
    Hits pcre_hits;
    pcre_hits.per_line.reserve(lines);
    Throughput pcre{0, lines, corpus_bytes};
    start = Clock::now();
    for (const auto& line : corpus) {
        std::set<std::string> found;
        for (size_t p = 0; p < pcre_codes.size(); ++p) {
            if (found.contains(expressions[p].signature_id)) continue;
            if (pcre2_jit_match(pcre_codes[p], reinterpret_cast<PCRE2_SPTR>(line.data()),
                                line.size(), 0, 0, match_data, nullptr) >= 0) {
                found.insert(expressions[p].signature_id);
            }
        }
        record(pcre_hits, std::move(found));
    }
    pcre.seconds = seconds_since(start);

    // BM_Signatures_std_regex, on an evenly spread sample.
    const size_t stride = std::max<size_t>(1, lines / std::max<size_t>(1, regex_lines));
    Hits std_hits;
    Throughput std_run{0, 0, 0};
    std::vector<size_t> sample;
    for (size_t i = 0; i < lines && sample.size() < regex_lines; i += stride) sample.push_back(i);
    start = Clock::now();
    for (const size_t index : sample) {
        const auto& line = corpus[index];
        std::set<std::string> found;
        for (size_t p = 0; p < std_regexes.size(); ++p) {
            if (found.contains(expressions[p].signature_id)) continue;
            if (std::regex_search(line, std_regexes[p])) found.insert(expressions[p].signature_id);
        }
        record(std_hits, std::move(found));
        std_run.bytes += line.size();
    }
    std_run.seconds = seconds_since(start);
    std_run.lines = sample.size();

    // The three must agree, or the comparison means nothing.
    size_t disagreements = 0;
    for (size_t i = 0; i < lines; ++i) {
        if (hs_hits.per_line[i] != pcre_hits.per_line[i]) {
            if (disagreements++ < 5)
                std::fprintf(stderr, "hyperscan/pcre2 differ on: %s\n", corpus[i].c_str());
        }
    }
    for (size_t s = 0; s < sample.size(); ++s) {
        if (hs_hits.per_line[sample[s]] != std_hits.per_line[s]) {
            if (disagreements++ < 10) {
                std::fprintf(stderr, "hyperscan/std::regex differ on: %s\n",
                             corpus[sample[s]].c_str());
            }
        }
    }

    std::printf(
        "\nsignature pack: %zu signatures, %zu cmdline expressions (of %zu in all fields)\n",
        pack->signatures.size(), expressions.size(), [&] {
            size_t all = 0;
            for (const auto field : gpuguard::signatures::kAllFields) {
                all += matcher->expressions(field).size();
            }
            return all;
        }());
    std::printf(
        "corpus: %zu command lines, %.1f MB, %zu lines matched (%.1f %%), %zu (line, signature) "
        "hits\n",
        lines, corpus_bytes / 1e6, hs_hits.lines_matched,
        100.0 * hs_hits.lines_matched / std::max<size_t>(1, lines), hs_hits.pairs);
    std::printf("\n%-26s %10s %14s %10s %12s\n", "case", "lines", "lines/s", "MB/s",
                "vs hyperscan");
    std::printf("%-26s %10zu %14.0f %10.1f %12s\n", "BM_Signatures_hyperscan", hs.lines,
                hs.lines_per_s(), hs.mb_per_s(), "1.00x");
    std::printf("%-26s %10zu %14.0f %10.1f %11.1fx\n", "BM_Signatures_pcre2_jit", pcre.lines,
                pcre.lines_per_s(), pcre.mb_per_s(),
                pcre.lines_per_s() > 0 ? hs.lines_per_s() / pcre.lines_per_s() : 0);
    std::printf("%-26s %10zu %14.0f %10.1f %11.1fx\n", "BM_Signatures_std_regex", std_run.lines,
                std_run.lines_per_s(), std_run.mb_per_s(),
                std_run.lines_per_s() > 0 ? hs.lines_per_s() / std_run.lines_per_s() : 0);
    const double vs_std = std_run.lines_per_s() > 0 ? hs.lines_per_s() / std_run.lines_per_s() : 0;
    const double vs_pcre = pcre.lines_per_s() > 0 ? hs.lines_per_s() / pcre.lines_per_s() : 0;
    std::printf("\ngoals: >= 20x std::regex: %.1fx %s; >= 5x PCRE2 JIT: %.1fx %s\n", vs_std,
                vs_std >= 20 ? "met" : "NOT met", vs_pcre, vs_pcre >= 5 ? "met" : "NOT met");
    std::printf(
        "\ncompile: Hyperscan whole pack %.3f s, YARA %.3f s; baselines: PCRE2 JIT %.3f s, "
        "std::regex %.3f s\n",
        hs_compile_s, yara_compile_s, pcre_compile_s, std_compile_s);
    std::printf(
        "memory: Hyperscan databases %.1f KiB + scratch %.1f KiB per thread; PCRE2 code+JIT "
        "%.1f KiB; RSS growth while compiling the pack %ld KiB\n",
        matcher->database_bytes() / 1024.0, matcher->scratch_bytes() / 1024.0, pcre_bytes / 1024.0,
        rss_after - rss_before);
    std::printf("agreement: %s (%zu disagreements)\n", disagreements ? "FAILED" : "identical hits",
                disagreements);

    pcre2_match_data_free(match_data);
    for (auto* code : pcre_codes) pcre2_code_free(code);
    return disagreements ? 1 : 0;
}
