// PidMap: one value per process id, for the tables the agent keeps per
// process (agent/process_table.h, gpuguard/detect/correlator.h). A flat index of
// (pid, pointer) slots with linear probing over separately allocated values:
// a lookup reads one slot array and then the value, where std::unordered_map
// reads its bucket, the node before the bucket's first and then the node,
// each a cache miss once the table outgrows the cache (a busy host's table
// does: every new process and every eviction looked up a cold entry).
// Values do not move while they are in the map: pointers stay valid until
// their own erase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace gpuguard::agent {

template <typename T>
class PidMap {
    struct Slot {
        uint32_t pid = 0;
        T* value = nullptr;  // nullptr: free
    };

  public:
    PidMap() = default;
    PidMap(const PidMap&) = delete;
    PidMap& operator=(const PidMap&) = delete;
    PidMap(PidMap&& other) noexcept
        : slots_(std::move(other.slots_)), size_(std::exchange(other.size_, 0)) {}
    PidMap& operator=(PidMap&& other) noexcept {
        if (this != &other) {
            clear();
            slots_ = std::move(other.slots_);
            size_ = std::exchange(other.size_, 0);
        }
        return *this;
    }
    ~PidMap() { clear(); }

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Room for `count` entries without growing.
    void reserve(size_t count) {
        if (count * 2 > slots_.size()) rehash(capacity_for(count));
    }

    T* find(uint32_t pid) {
        if (slots_.empty()) return nullptr;
        for (size_t i = home(pid);; i = next(i)) {
            if (!slots_[i].value) return nullptr;
            if (slots_[i].pid == pid) return slots_[i].value;
        }
    }
    const T* find(uint32_t pid) const { return const_cast<PidMap*>(this)->find(pid); }

    // The value of `pid`, made with T{} when absent; `.second` says it was.
    std::pair<T*, bool> try_emplace(uint32_t pid) {
        if ((size_ + 1) * 2 > slots_.size()) rehash(capacity_for(size_ + 1));
        size_t i = home(pid);
        for (; slots_[i].value; i = next(i)) {
            if (slots_[i].pid == pid) return {slots_[i].value, false};
        }
        auto value = std::make_unique<T>();
        slots_[i] = Slot{pid, value.release()};
        ++size_;
        return {slots_[i].value, true};
    }
    T& operator[](uint32_t pid) { return *try_emplace(pid).first; }

    // Removes `pid`'s value; false when there was none.
    bool erase(uint32_t pid) {
        if (slots_.empty()) return false;
        size_t hole = home(pid);
        for (; slots_[hole].pid != pid || !slots_[hole].value; hole = next(hole)) {
            if (!slots_[hole].value) return false;
        }
        delete slots_[hole].value;
        --size_;
        // Backward shift: an entry after the hole moves into it unless its
        // home lies cyclically after the hole, so every probe sequence stays
        // unbroken without tombstones.
        for (size_t i = next(hole); slots_[i].value; i = next(i)) {
            const size_t want = home(slots_[i].pid);
            const bool stays = hole <= i ? (hole < want && want <= i) : (hole < want || want <= i);
            if (stays) continue;
            slots_[hole] = slots_[i];
            hole = i;
        }
        slots_[hole] = Slot{};
        return true;
    }

    // Slots a lookup of `pid` reads (1 when it sits at its home; for an
    // absent pid, up to the free slot that ends its run): tests look at it.
    size_t probe_length(uint32_t pid) const {
        if (slots_.empty()) return 0;
        size_t count = 1;
        for (size_t i = home(pid); slots_[i].value && slots_[i].pid != pid; i = next(i)) ++count;
        return count;
    }

    void clear() {
        for (auto& slot : slots_) {
            delete slot.value;
            slot = Slot{};
        }
        size_ = 0;
    }

    // Iteration in slot order (no particular pid order): `for (auto&& [pid,
    // value] : map)`, value a T&. Erasing while iterating is not allowed.
    template <typename Value>
    class Iterator {
      public:
        using value_type = std::pair<uint32_t, Value&>;
        using difference_type = std::ptrdiff_t;
        Iterator() = default;
        Iterator(const Slot* slot, const Slot* end) : slot_(slot), end_(end) { skip(); }
        value_type operator*() const { return {slot_->pid, *slot_->value}; }
        Iterator& operator++() {
            ++slot_;
            skip();
            return *this;
        }
        Iterator operator++(int) {
            Iterator before = *this;
            ++*this;
            return before;
        }
        bool operator==(const Iterator& other) const { return slot_ == other.slot_; }

      private:
        void skip() {
            while (slot_ != end_ && !slot_->value) ++slot_;
        }
        const Slot* slot_ = nullptr;
        const Slot* end_ = nullptr;
    };
    Iterator<T> begin() { return {slots_.data(), slots_.data() + slots_.size()}; }
    Iterator<T> end() { return {slots_.data() + slots_.size(), slots_.data() + slots_.size()}; }
    Iterator<const T> begin() const { return {slots_.data(), slots_.data() + slots_.size()}; }
    Iterator<const T> end() const {
        return {slots_.data() + slots_.size(), slots_.data() + slots_.size()};
    }

  private:
    static size_t capacity_for(size_t count) {
        size_t capacity = 16;
        while (capacity < count * 2) capacity *= 2;  // at most half full: short probes
        return capacity;
    }
    // Blocks of 4 pids are mixed (murmur3's finaliser) and the pids of a
    // block keep their order inside it: pids that differ only in their high
    // bits, and long runs of sequential pids, spread over the slots instead
    // of piling up in one run, while pids the kernel hands out one after
    // another (most new processes) share a cache line of slots. Blocks of 8
    // were faster still on the replay benchmark but made runs twice as long.
    size_t home(uint32_t pid) const {
        uint32_t h = pid >> 2;
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
        return ((h << 2) | (pid & 3)) & (slots_.size() - 1);
    }
    size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
    void rehash(size_t capacity) {
        std::vector<Slot> old(capacity);
        old.swap(slots_);
        for (const Slot& slot : old) {
            if (!slot.value) continue;
            size_t i = home(slot.pid);
            while (slots_[i].value) i = next(i);
            slots_[i] = slot;
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
};

}  // namespace gpuguard::agent
