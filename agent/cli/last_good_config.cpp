#include "last_good_config.h"

#include <cstdlib>
#include <fstream>

#include "gpuguard/common/read_file.h"
#include "gpuguard/common/sha256.h"

namespace gpuguard::agent {

std::optional<std::filesystem::path> last_good_config_copy(const std::string& config_path) {
    std::string state;
    if (const char* systemd = std::getenv("STATE_DIRECTORY"); systemd && *systemd) {
        state = std::string(systemd).substr(0, std::string(systemd).find(':'));
    } else if (const char* own = std::getenv("GPUGUARD_STATE_DIR"); own && *own) {
        state = own;
    }
    if (state.empty() || config_path.empty()) return std::nullopt;
    const std::string absolute = std::filesystem::absolute(config_path).lexically_normal().string();
    return std::filesystem::path(state) / "last-good" /
           ("config-" + sha256_hex(absolute).substr(0, 16) + ".yaml");
}

void keep_last_good_config(const std::filesystem::path& copy, std::string_view text) {
    std::error_code ec;
    std::filesystem::create_directories(copy.parent_path(), ec);
    const std::filesystem::path fresh = copy.string() + ".new";
    {
        std::ofstream out(fresh, std::ios::binary | std::ios::trunc);
        out << text;
        std::ofstream(copy.string() + ".sha256.new", std::ios::trunc) << sha256_hex(text) << "\n";
    }
    std::filesystem::rename(copy.string() + ".sha256.new", copy.string() + ".sha256", ec);
    if (!ec) std::filesystem::rename(fresh, copy, ec);
}

Result<Config> load_last_good_config(const std::filesystem::path& copy) {
    auto text = read_file(copy);
    if (!text) return fail(ErrorCode::kNotFound, "no last good configuration at " + copy.string());
    auto sum = read_file(copy.string() + ".sha256");
    if (!sum || sum->substr(0, 64) != sha256_hex(*text)) {
        return fail(ErrorCode::kParse,
                    copy.string() + ": its checksum does not match; the copy is refused");
    }
    return load_config_text(*text, copy.string());
}

}  // namespace gpuguard::agent
