#include "rules/last_good.h"

#include <fstream>
#include <sstream>

#include "gpuguard/common/read_file.h"
#include "gpuguard/common/sha256.h"

namespace gpuguard::rules {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifest = "manifest";  // lines: "INDEX SHA256 NAME"

}  // namespace

Status save_last_good(const fs::path& dir, const std::vector<RuleFile>& files) {
    std::error_code ec;
    const fs::path fresh = dir.string() + ".new";
    const fs::path old = dir.string() + ".old";
    fs::remove_all(fresh, ec);
    fs::create_directories(fresh, ec);
    if (ec) return fail(ErrorCode::kIo, "cannot create " + fresh.string() + ": " + ec.message());
    std::ostringstream manifest;
    for (size_t index = 0; index < files.size(); ++index) {
        const fs::path copy = fresh / (std::to_string(index) + ".yaml");
        std::ofstream out(copy, std::ios::binary | std::ios::trunc);
        out << files[index].text;
        out.close();
        if (!out) return fail(ErrorCode::kIo, "cannot write " + copy.string());
        manifest << index << ' ' << sha256_hex(files[index].text) << ' ' << files[index].name
                 << '\n';
    }
    std::ofstream out(fresh / kManifest, std::ios::binary | std::ios::trunc);
    out << manifest.str();
    out.close();
    if (!out) return fail(ErrorCode::kIo, "cannot write " + (fresh / kManifest).string());
    // Old copy aside, new one in, old one gone.
    fs::remove_all(old, ec);
    if (fs::exists(dir)) fs::rename(dir, old, ec);
    if (ec) return fail(ErrorCode::kIo, "cannot move " + dir.string() + ": " + ec.message());
    fs::rename(fresh, dir, ec);
    if (ec) return fail(ErrorCode::kIo, "cannot rename " + fresh.string() + ": " + ec.message());
    fs::remove_all(old, ec);
    return {};
}

Result<std::vector<RuleFile>> read_last_good(const fs::path& dir) {
    std::ifstream manifest(dir / kManifest);
    if (!manifest) return fail(ErrorCode::kNotFound, "no last good rule set in " + dir.string());
    std::vector<RuleFile> files;
    std::string line;
    while (std::getline(manifest, line)) {
        std::istringstream fields(line);
        size_t index = 0;
        std::string sum, name;
        if (!(fields >> index >> sum) || !std::getline(fields >> std::ws, name)) {
            return fail(ErrorCode::kParse,
                        (dir / kManifest).string() + ": bad line '" + line + "'");
        }
        const fs::path copy = dir / (std::to_string(index) + ".yaml");
        auto text = read_file(copy);
        if (!text) return fail(ErrorCode::kParse, copy.string() + ": " + text.error().message);
        if (sha256_hex(*text) != sum) {
            return fail(ErrorCode::kParse,
                        copy.string() + ": its checksum does not match the manifest; refused");
        }
        files.push_back(RuleFile{name + " (last good copy)", std::move(*text)});
    }
    return files;
}

}  // namespace gpuguard::rules
