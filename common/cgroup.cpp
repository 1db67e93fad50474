#include "gpuguard/common/cgroup.h"

#include <fstream>
#include <sstream>

namespace gpuguard {

std::string find_cgroup2_mount(const std::string& mounts_file) {
    std::ifstream in(mounts_file);
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string device, mount_point, type;
        if (fields >> device >> mount_point >> type && type == "cgroup2") return mount_point;
    }
    return "";
}

}  // namespace gpuguard
