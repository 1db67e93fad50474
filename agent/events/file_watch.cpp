#include "gpuguard/events/file_watch.h"

#include "events.h"

namespace gpuguard::agent {
namespace {

bool is_shell_rc(std::string_view name) {
    return name == ".bashrc" || name == ".bash_profile" || name == ".bash_login" ||
           name == ".profile" || name == ".zshrc" || name == ".zprofile" ||
           name == "/etc/profile" || name == "/etc/profile.d/" || name == "/etc/bash.bashrc" ||
           name == "/etc/zsh/zshrc";
}

std::string kind_of(std::string_view entry) {
    if (entry.find("ld.so.preload") != std::string_view::npos) return "preload";
    if (entry.find("authorized_keys") != std::string_view::npos) return "ssh_keys";
    if (entry.find("systemd") != std::string_view::npos) return "systemd";
    if (entry.find("cron") != std::string_view::npos) return "cron";
    if (is_shell_rc(entry)) return "shell_rc";
    return "other";
}

}  // namespace

const std::vector<std::string>& default_watch_files() {
    static const std::vector<std::string> kDefaults = {
        "/etc/ld.so.preload",
        "/etc/crontab",
        "/etc/cron*",  // cron.d, cron.hourly, cron.daily, cron.weekly, cron.monthly, cron.allow
        "/var/spool/cron/",
        "/etc/systemd/system/",
        "/lib/systemd/system/",
        "/usr/lib/systemd/system/",
        "/etc/systemd/user/",
        "~/.config/systemd/user/",
        "/etc/profile",
        "/etc/profile.d/",
        "/etc/bash.bashrc",
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".profile",
        ".zshrc",
        "authorized_keys",
        "authorized_keys2",
    };
    return kDefaults;
}

Result<std::vector<WatchPattern>> parse_watch_entry(std::string_view entry,
                                                    const std::vector<std::string>& homes) {
    const auto invalid = [&](const std::string& why) -> Result<std::vector<WatchPattern>> {
        return fail(ErrorCode::kInvalidArgument,
                    "sensor.watch_files entry '" + std::string(entry) + "': " + why);
    };
    if (entry.empty()) return invalid("empty");
    const std::string kind = kind_of(entry);
    std::vector<std::string> texts;
    if (entry.starts_with("~/")) {
        for (const auto& home : homes) {
            if (home.empty() || home == "/") continue;
            texts.push_back(home + std::string(entry.substr(1)));
        }
    } else {
        texts.emplace_back(entry);
    }
    std::vector<WatchPattern> out;
    for (auto& text : texts) {
        WatchPattern pattern;
        pattern.kind = kind;
        const auto star = text.find('*');
        if (star != std::string::npos && star + 1 != text.size()) {
            return invalid("'*' may only end an entry");
        }
        if (text.front() != '/') {
            if (text.find('/') != std::string::npos) {
                return invalid("a relative entry is a file name, without '/'");
            }
            if (star != std::string::npos) return invalid("a file name takes no '*'");
            if (text.size() >= GG_WATCH_NAME_LEN - 1) {
                return invalid("a file name is compared up to " +
                               std::to_string(GG_WATCH_NAME_LEN - 2) + " bytes");
            }
            pattern.form = WatchPattern::Form::kBasename;
        } else if (star != std::string::npos) {
            text.pop_back();
            pattern.form = WatchPattern::Form::kPrefix;
        } else {
            pattern.form =
                text.back() == '/' ? WatchPattern::Form::kPrefix : WatchPattern::Form::kExact;
        }
        if (pattern.form != WatchPattern::Form::kBasename && text.size() >= GG_WATCH_PATH_LEN) {
            return invalid("a path is compared up to " + std::to_string(GG_WATCH_PATH_LEN - 1) +
                           " bytes");
        }
        pattern.text = std::move(text);
        out.push_back(std::move(pattern));
    }
    return out;
}

std::string watch_kind(const std::vector<WatchPattern>& patterns, std::string_view path) {
    const auto slash = path.rfind('/');
    const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    // The kernel's order: the longest path prefix, then the name.
    const WatchPattern* best = nullptr;
    for (const auto& pattern : patterns) {
        const bool match = pattern.form == WatchPattern::Form::kExact ? path == pattern.text
                           : pattern.form == WatchPattern::Form::kPrefix
                               ? path.starts_with(pattern.text)
                               : false;
        if (match && (!best || pattern.text.size() > best->text.size())) best = &pattern;
    }
    if (best) return best->kind;
    for (const auto& pattern : patterns) {
        if (pattern.form == WatchPattern::Form::kBasename && name == pattern.text) {
            return pattern.kind;
        }
    }
    return "";
}

}  // namespace gpuguard::agent
