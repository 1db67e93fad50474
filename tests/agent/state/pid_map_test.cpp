// PidMap against std::unordered_map: the same operations give the same
// contents, through growth and through erases that shift colliding runs.
#include "gpuguard/state/pid_map.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

std::map<uint32_t, std::string> contents(const PidMap<std::string>& map) {
    std::map<uint32_t, std::string> out;
    for (const auto& [pid, value] : map) {
        EXPECT_TRUE(out.emplace(pid, value).second) << "pid " << pid << " listed twice";
    }
    return out;
}

TEST(PidMap, FindEmplaceEraseBasics) {
    PidMap<std::string> map;
    EXPECT_EQ(map.find(1), nullptr);
    EXPECT_FALSE(map.erase(1));
    auto [value, created] = map.try_emplace(7);
    ASSERT_TRUE(created);
    *value = "seven";
    EXPECT_FALSE(map.try_emplace(7).second);
    EXPECT_EQ(*map.find(7), "seven");
    map[0] = "zero";  // pid 0 is a key like any other (telemetry events carry it)
    EXPECT_EQ(map.size(), 2u);
    EXPECT_TRUE(map.erase(7));
    EXPECT_EQ(map.find(7), nullptr);
    EXPECT_EQ(*map.find(0), "zero");
    EXPECT_EQ(map.size(), 1u);
}

TEST(PidMap, ValuesStayPutWhileTheIndexGrows) {
    PidMap<std::string> map;
    std::string* first = &map[1];
    *first = "one";
    for (uint32_t pid = 2; pid < 5000; ++pid) map[pid] = std::to_string(pid);
    EXPECT_EQ(map.find(1), first);
    EXPECT_EQ(*first, "one");
}

// Random inserts and erases over a small pid range (long collision runs,
// erases inside them) and over the whole range, checked after every step.
TEST(PidMap, MatchesAReferenceMapUnderRandomOperations) {
    for (const uint32_t range : {64u, 4096u, 0xffffffffu}) {
        std::mt19937 random(range);
        std::uniform_int_distribution<uint32_t> pid_of(0, range);
        PidMap<std::string> map;
        std::map<uint32_t, std::string> reference;
        for (int step = 0; step < 20000; ++step) {
            const uint32_t pid = pid_of(random);
            if (random() % 3 == 0) {
                EXPECT_EQ(map.erase(pid), reference.erase(pid) == 1);
            } else {
                const auto [value, created] = map.try_emplace(pid);
                EXPECT_EQ(created, !reference.contains(pid));
                *value = std::to_string(step);
                reference[pid] = *value;
            }
            ASSERT_EQ(map.size(), reference.size()) << "step " << step;
            if (step % 997 == 0) {
                ASSERT_EQ(contents(map), reference) << "step " << step;
            }
        }
        for (const auto& [pid, value] : reference) {
            const std::string* found = map.find(pid);
            ASSERT_NE(found, nullptr) << pid;
            EXPECT_EQ(*found, value);
        }
        EXPECT_EQ(contents(map), reference);
        // Everything erased, in an order unlike the inserts': nothing is left
        // findable (a broken shift leaves entries its probe cannot reach).
        std::vector<uint32_t> pids;
        for (const auto& [pid, value] : reference) pids.push_back(pid);
        std::shuffle(pids.begin(), pids.end(), random);
        for (size_t i = 0; i < pids.size(); ++i) {
            ASSERT_TRUE(map.erase(pids[i])) << pids[i];
            if (i + 1 < pids.size()) {
                ASSERT_NE(map.find(pids[i + 1]), nullptr) << pids[i + 1];
            }
        }
        EXPECT_TRUE(map.empty());
        EXPECT_TRUE(contents(map).empty());
    }
}

// The pid patterns of a host: a long run handed out one after another, pids
// that differ only in their high bits (a wrapped pid_max), and scattered
// ones. Lookups must stay short for all of them, present or absent: without
// the mixing of blocks a run of sequential pids is one long probe run.
TEST(PidMap, ProbesStayShortForSequentialAndHighBitPids) {
    PidMap<int> map;
    std::vector<uint32_t> pids;
    for (uint32_t pid = 300; pid < 300 + 20000; ++pid) pids.push_back(pid);
    for (uint32_t i = 1; i <= 4000; ++i) pids.push_back(i << 16 | 77);
    std::mt19937 rng(5);
    for (int i = 0; i < 4000; ++i) pids.push_back(rng() % 4194304);
    for (uint32_t pid : pids) map[pid] = 1;
    const auto mean_and_max = [&](const std::vector<uint32_t>& lookups) {
        size_t total = 0, longest = 0;
        for (uint32_t pid : lookups) {
            const size_t length = map.probe_length(pid);
            total += length;
            longest = std::max(longest, length);
        }
        return std::pair{static_cast<double>(total) / static_cast<double>(lookups.size()), longest};
    };
    const auto [present_mean, present_max] = mean_and_max(pids);
    EXPECT_LT(present_mean, 3.0);
    EXPECT_LT(present_max, 96u);
    std::vector<uint32_t> absent;
    for (uint32_t pid = 300 + 20000; pid < 300 + 30000; ++pid) absent.push_back(pid);
    for (uint32_t i = 1; i <= 4000; ++i) absent.push_back(i << 16 | 78);
    const auto [absent_mean, absent_max] = mean_and_max(absent);
    EXPECT_LT(absent_mean, 5.0);
    EXPECT_LT(absent_max, 128u);
}

TEST(PidMap, MovesAndClears) {
    PidMap<std::string> map;
    map[3] = "three";
    PidMap<std::string> moved(std::move(map));
    EXPECT_EQ(*moved.find(3), "three");
    map = std::move(moved);
    EXPECT_EQ(*map.find(3), "three");
    map.clear();
    EXPECT_EQ(map.find(3), nullptr);
    EXPECT_EQ(map.size(), 0u);
    map[3] = "again";
    EXPECT_EQ(*map.find(3), "again");
}

}  // namespace
}  // namespace gpuguard::agent
