// gpuguard scan PID|FILE: match one process (comm, executable path, command
// line, YARA on /proc/PID/exe) or one file (path, content, YARA) against the
// effective signatures. Exit 0: nothing found, 1: matches, 2: error.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent::cli {
namespace {

struct ScanCommand {
    std::string target;
    std::string main_file = rules::RulePaths{}.main_file.string();
    std::string drop_in_dir = rules::RulePaths{}.drop_in_dir.string();
    uint64_t max_size_mb = 64;
};

// Up to `limit` bytes of the file, read in pieces: only what the file holds
// is allocated (64 MiB zeroed up front was most of a warm `scan FILE`).
std::string read_text(const std::filesystem::path& path, size_t limit) {
    std::ifstream in(path, std::ios::binary);
    std::string text;
    char chunk[64 * 1024];
    while (text.size() < limit) {
        in.read(chunk, static_cast<std::streamsize>(std::min(sizeof chunk, limit - text.size())));
        const auto got = in.gcount();
        if (got <= 0) break;
        text.append(chunk, static_cast<size_t>(got));
    }
    return text;
}

struct Hit {
    std::string id;
    std::string where;  // field or "yara"
};

int run_scan(const ScanCommand& command) {
    int exit_code = 0;
    auto set = load_rule_set(command.main_file, command.drop_in_dir, 2, exit_code);
    if (!set) return exit_code;
    auto scanner = set->scanner();
    auto pack = signatures::load_builtin_pack();
    if (!scanner || !pack) {
        std::cerr << (scanner ? pack.error().message : scanner.error().message) << "\n";
        return 2;
    }
    signatures::YaraOptions yara_options;
    yara_options.max_file_size = command.max_size_mb << 20;
    auto yara =
        signatures::YaraScanner::compile(*pack, yara_options, rules::default_compile_cache());
    if (!yara) {
        std::cerr << yara.error().message << "\n";
        return 2;
    }

    std::vector<Hit> hits;
    auto add = [&](const std::vector<std::string_view>& ids, const char* where) {
        for (const auto& id : ids) hits.push_back({std::string(id), where});
    };
    Result<signatures::YaraReport> report = fail(ErrorCode::kInternal, "not scanned");
    const bool is_pid =
        !command.target.empty() && std::all_of(command.target.begin(), command.target.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    if (is_pid) {
        const std::filesystem::path proc = "/proc/" + command.target;
        if (!std::filesystem::exists(proc)) {
            std::cerr << "no process " << command.target << "\n";
            return 2;
        }
        std::string comm = read_text(proc / "comm", 64);
        if (!comm.empty() && comm.back() == '\n') comm.pop_back();
        std::error_code ec;
        const std::string exe = std::filesystem::read_symlink(proc / "exe", ec).string();
        std::string cmdline = read_text(proc / "cmdline", 1 << 20);
        while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        std::cout << "process " << command.target << ": comm=" << printable(comm)
                  << " exe=" << printable(exe) << "\ncmdline: " << printable(cmdline) << "\n";
        add(scanner->match_process(comm, exe), "process");
        add(scanner->match(signatures::Field::kCmdline, cmdline), "cmdline");
        report = yara->scan_pid(static_cast<pid_t>(std::stol(command.target)));
    } else {
        const std::filesystem::path path = command.target;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec)) {
            std::cerr << command.target << ": not a regular file\n";
            return 2;
        }
        std::cout << "file " << path.string() << "\n";
        add(scanner->match(signatures::Field::kProcess, std::filesystem::absolute(path).string()),
            "path");
        add(scanner->match(signatures::Field::kConfig, read_text(path, command.max_size_mb << 20)),
            "content");
        report = yara->scan_file(path);
    }
    if (report) {
        std::cout << "sha256: " << report->sha256 << " (" << report->size << " bytes)\n";
        for (const auto& id : report->signature_ids) {
            if (!set->disabled().contains(id)) hits.push_back({id, "yara"});
        }
    } else {
        std::cout << "yara: not scanned: " << report.error().message << "\n";
    }

    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& hit : hits) {
        if (!seen.insert({hit.id, hit.where}).second) continue;
        const auto* entry = set->find(hit.id);
        if (!entry) continue;
        std::printf("%-26s %-8s %-9s %.2f %-8s %s\n", hit.id.c_str(), hit.where.c_str(),
                    signatures::to_string(entry->signature.severity), entry->signature.confidence,
                    rules::to_string(entry->action), entry->signature.name.c_str());
    }
    if (seen.empty()) std::cout << "no signature matched\n";
    if (!report && report.error().code != ErrorCode::kUnsupported && seen.empty()) return 2;
    return seen.empty() ? 0 : 1;
}

}  // namespace

void add_scan_command(CLI::App& app, Context& context) {
    auto command = std::make_shared<ScanCommand>();
    auto* scan =
        app.add_subcommand("scan",
                           "match a process (PID) or a file against the signatures and YARA rules "
                           "(exit 0: clean, 1: matches, 2: error)");
    scan->add_option("target", command->target, "PID or FILE")->required();
    scan->add_option("--file", command->main_file, "main rule file")->capture_default_str();
    scan->add_option("--dir", command->drop_in_dir, "drop-in rule directory")
        ->capture_default_str();
    scan->add_option("--max-size-mb", command->max_size_mb, "largest file YARA scans")
        ->capture_default_str();
    scan->callback([&context, command] {
        set_log_level(context.log_level.empty() ? "warn" : context.log_level);
        context.exit_code = run_scan(*command);
    });
}

}  // namespace gpuguard::agent::cli
