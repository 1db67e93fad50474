// WatchList: the agent's book of a kernel watch list -- oldest out first when
// full, refreshes, expiry, and the counts `gpuguard status` shows; and the
// address keys the kernel's watched_addrs map uses. No BPF here (the maps
// themselves: tests/bpf/connect_test.cpp).
#include "gpuguard/sensor/watch_list.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

TEST(WatchList, a_full_list_drops_its_oldest_entry_and_counts_it) {
    WatchList<uint32_t> list(2);
    EXPECT_TRUE(list.add(10, 0).is_new);
    EXPECT_FALSE(list.add(11, 0).evicted);
    // A refresh makes 10 the newest; 11 is then the oldest.
    const auto refreshed = list.add(10, 0);
    EXPECT_FALSE(refreshed.is_new);
    EXPECT_FALSE(refreshed.evicted);
    const auto added = list.add(12, 0);
    ASSERT_TRUE(added.evicted);
    EXPECT_EQ(*added.evicted, 11u);
    EXPECT_EQ(list.keys(), (std::vector<uint32_t>{10, 12}));
    const auto counts = list.counts();
    EXPECT_EQ(counts.entries, 2u);
    EXPECT_EQ(counts.capacity, 2u);
    EXPECT_EQ(counts.added, 3u);
    EXPECT_EQ(counts.evicted, 1u);
    EXPECT_EQ(counts.removed, 0u);
}

TEST(WatchList, entries_expire_at_their_time_and_removal_is_counted) {
    WatchList<uint32_t> list(8);
    list.add(1, 100);
    list.add(2, 0);  // never expires
    list.add(3, 300);
    EXPECT_TRUE(list.expire(99).empty());
    EXPECT_EQ(list.expire(100), (std::vector<uint32_t>{1}));
    list.add(3, 500);  // a fresh answer moves its time on
    EXPECT_TRUE(list.expire(400).empty());
    EXPECT_TRUE(list.remove(2));
    EXPECT_FALSE(list.remove(2));
    EXPECT_EQ(list.expire(1'000'000), (std::vector<uint32_t>{3}));
    EXPECT_TRUE(list.empty());
    const auto counts = list.counts();
    EXPECT_EQ(counts.expired, 2u);
    EXPECT_EQ(counts.removed, 1u);
    EXPECT_EQ(counts.added, 3u);
}

TEST(WatchList, address_keys_take_the_connect_events_form) {
    const auto v4 = watch_address_key("203.0.113.5");
    ASSERT_TRUE(v4);
    EXPECT_EQ(*v4, (AddressKey{203, 0, 113, 5}));
    EXPECT_EQ(watch_address_key("::ffff:203.0.113.5"), v4) << "v4-mapped: the IPv4 form";
    const auto v6 = watch_address_key("2001:db8::1");
    ASSERT_TRUE(v6);
    EXPECT_EQ(*v6, (AddressKey{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
    EXPECT_FALSE(watch_address_key("pool.example.org"));
    EXPECT_FALSE(watch_address_key(""));

    WatchList<AddressKey, AddressKeyHash> list(1);
    list.add(*v4, 0);
    EXPECT_TRUE(list.contains(*watch_address_key("::ffff:203.0.113.5")));
}

}  // namespace
}  // namespace gpuguard::agent
