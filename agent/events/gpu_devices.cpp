#include "gpuguard/events/gpu_devices.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gpuguard/common/text.h"

namespace gpuguard::agent {
namespace {

// Char-device driver names of GPUs and accelerators as they appear in
// /proc/devices (register_chrdev / alloc_chrdev_region names in the drivers).
bool is_gpu_driver(std::string_view name) {
    static constexpr std::string_view kExact[] = {
        "nvidia", "nvidia-frontend", "nvidia-uvm", "nvidia-nvlink", "nvidia-nvswitch", "drm", "kfd",
        "accel"};
    for (auto exact : kExact) {
        if (name == exact) return true;
    }
    return name.starts_with("nvidia-caps");  // nvidia-caps, nvidia-caps-imex-channels
}

}  // namespace

std::string GpuDeviceNumber::to_string() const {
    return std::to_string(major) + ":" + (minor ? std::to_string(*minor) : std::string("*"));
}

Result<GpuDeviceNumber> parse_gpu_device_number(std::string_view text) {
    const auto colon = text.find(':');
    const auto bad = [&](const char* why) {
        return fail(ErrorCode::kInvalidArgument, "bad GPU device number '" + std::string(text) +
                                                     "': " + why +
                                                     " (expected \"MAJOR:MINOR\" or \"MAJOR:*\")");
    };
    if (colon == std::string_view::npos) return bad("no ':'");
    const auto major = parse_u32(text.substr(0, colon));
    // The kernel's dev_t has 12 bits of major and 20 of minor.
    if (!major || *major >= (1u << 12)) return bad("major is not a number below 4096");
    GpuDeviceNumber number{*major, std::nullopt, "config"};
    const auto minor_text = text.substr(colon + 1);
    if (minor_text != "*") {
        const auto minor = parse_u32(minor_text);
        if (!minor || *minor >= (1u << 20)) return bad("minor is not a number below 1048576");
        number.minor = *minor;
    }
    return number;
}

std::optional<std::pair<uint32_t, uint32_t>> parse_device_number(std::string_view text) {
    const auto colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto major = parse_u32(text.substr(0, colon));
    const auto minor = parse_u32(text.substr(colon + 1));
    if (!major || !minor) return std::nullopt;
    return std::pair{*major, *minor};
}

std::vector<GpuDeviceNumber> gpu_devices_from_proc_devices(std::string_view text) {
    std::vector<GpuDeviceNumber> found;
    bool in_char_section = false;
    std::istringstream lines{std::string(text)};
    std::string line;
    while (std::getline(lines, line)) {
        if (line == "Character devices:") {
            in_char_section = true;
            continue;
        }
        if (line == "Block devices:") {
            in_char_section = false;
            continue;
        }
        if (!in_char_section) continue;
        std::istringstream fields(line);
        std::string major_text, name;
        if (!(fields >> major_text >> name)) continue;
        const auto major = parse_u32(major_text);
        if (!major || !is_gpu_driver(name)) continue;
        found.push_back(GpuDeviceNumber{*major, std::nullopt, name});
    }
    return found;
}

Result<std::vector<GpuDeviceNumber>> read_gpu_devices(const std::filesystem::path& proc_root) {
    const auto path = proc_root / "devices";
    std::ifstream in(path);
    if (!in) {
        const int err = errno;
        return fail(ErrorCode::kIo, "cannot read " + path.string() + ": " + std::strerror(err),
                    err);
    }
    std::stringstream text;
    text << in.rdbuf();
    return gpu_devices_from_proc_devices(text.str());
}

}  // namespace gpuguard::agent
