// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the native
// backend of PyTorch 2.x): which segments it reserves from the driver for a sequence of
// allocations and frees on one stream. What torch.cuda.max_memory_reserved() reports is the peak
// of the segments' total; max_memory_allocated() the peak of the blocks handed out (block sizes,
// not request sizes). docs/memory-model.md, "Reserved memory", describes the rules modelled here.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mme {

// The allocator's constants (CUDACachingAllocator.cpp, namespace c10::cuda::CUDACachingAllocator).
inline constexpr std::int64_t kAllocMinBlockSize = 512;      // kMinBlockSize: every request is rounded to 512 B
inline constexpr std::int64_t kAllocSmallSize = 1 << 20;     // kSmallSize: requests up to 1 MiB use the small pool
inline constexpr std::int64_t kAllocSmallBuffer = 2 << 20;   // kSmallBuffer: small-pool segments are 2 MiB
inline constexpr std::int64_t kAllocLargeBuffer = 20 << 20;  // kLargeBuffer: requests of 1-10 MiB share 20 MiB segments
inline constexpr std::int64_t kAllocMinLargeAlloc = 10 << 20;  // kMinLargeAlloc
inline constexpr std::int64_t kAllocRoundLarge = 2 << 20;      // kRoundLarge: larger segments are rounded to 2 MiB
inline constexpr std::int64_t kAllocNoSplitLimit = std::numeric_limits<std::int64_t>::max();

// PYTORCH_CUDA_ALLOC_CONF (c10/cuda/CUDAAllocatorConfig.cpp parseArgs), as far as it decides
// reserved memory.
struct AllocatorConfig {
  bool caching = true;               // PYTORCH_NO_CUDA_MEMORY_CACHING=1: every block is its own cudaMalloc
  bool expandable_segments = false;  // expandable_segments:True
  std::int64_t max_split_size = kAllocNoSplitLimit;  // max_split_size_mb (bytes); unlimited by default
  std::int64_t roundup_power2_divisions = 0;         // roundup_power2_divisions:N (0/1: 512-byte rounding only)
  double garbage_collection_threshold = 0;           // garbage_collection_threshold (0: off)
  bool async_backend = false;                        // backend:cudaMallocAsync (the driver's pool: not modelled)
};

// Parses PYTORCH_CUDA_ALLOC_CONF's value ("key:value,key:value"); UsageError naming the key for a
// value PyTorch refuses or a key it does not know. Keys about pinned host memory are accepted
// (no device memory). The per-size list form of roundup_power2_divisions ("[256:1,>:4]") is
// refused as not modelled.
AllocatorConfig parse_alloc_conf(std::string_view text);

// round_size(): the block size of a request (512-byte multiples, or the next power-of-2 division).
std::int64_t allocator_round_size(std::int64_t bytes, const AllocatorConfig& config);
// get_allocation_size(): the size of the segment cudaMalloc'd for a (rounded) request that no cached
// block serves: 2 MiB up to 1 MiB, 20 MiB below 10 MiB, else rounded up to 2 MiB.
std::int64_t allocator_segment_size(std::int64_t rounded);

// The allocator on one device and one stream. malloc() returns a handle for free(); a request of
// 0 bytes allocates nothing (PyTorch returns a null pointer) and gives -1, which free() ignores.
class CachingAllocatorModel {
 public:
  explicit CachingAllocatorModel(const AllocatorConfig& config = {});
  int malloc(std::int64_t bytes);
  void free(int handle);
  // torch.cuda.empty_cache(): release_cached_blocks gives every cached block that is a whole
  // segment back to the driver; segments that still hold a live block stay. Expandable
  // segments (which unmap their free pages instead) are left as they are.
  void empty_cache();

  std::int64_t reserved() const { return reserved_; }    // torch.cuda.memory_reserved()
  std::int64_t allocated() const { return allocated_; }  // memory_allocated(): block sizes
  std::int64_t requested() const { return requested_; }  // the requests' own sizes
  std::int64_t peak_reserved() const { return peak_reserved_; }
  std::int64_t peak_allocated() const { return peak_allocated_; }
  std::int64_t peak_requested() const { return peak_requested_; }
  std::size_t segments() const;  // segments (expandable: mapped pages count as one per pool)
  // A digest of where every block lies: two allocators with the same digest serve the same
  // sequence alike (the replay stops repeating an identical period on it). Kept up to date with
  // each change (a sum of the blocks' and segments' hashes), so reading it costs nothing.
  std::uint64_t state_digest() const { return digest_; }

 private:
  struct Block {
    std::int64_t offset = 0, size = 0, requested = 0;
    int segment = -1, prev = -1, next = -1;
    bool free = true, live = false;  // live: the slot is in use (not recycled)
    bool pooled = false;             // cached in its pool (free, waiting for a request)
    std::uint32_t pool_entry = 0;    // which of the pool's entries for this slot is current
  };
  struct Segment {
    std::int64_t size = 0;  // expandable: the mapped bytes
    bool small = false, expandable = false;
    int first = -1, last = -1;  // blocks in address order
  };
  // The cached blocks of a pool in BlockComparatorSize's order (size, then address): the blocks
  // of each size on a heap by address, the sizes in a map. A replay caches tens of thousands of
  // blocks of a few hundred sizes (a MoE layer's experts are alike), so a request costs a search
  // among the sizes and a heap step, where a tree of every block cost half of the replay.
  // Entries leave a heap lazily: a block taken out of the pool by a merge leaves an entry whose
  // pool_entry no longer matches, dropped when it reaches the top (or when the heap is compacted).
  struct Entry {
    std::int64_t address = 0;
    int block = -1;
    std::uint32_t serial = 0;
  };
  struct Bucket {
    std::vector<Entry> heap;  // a min-heap by address
    std::int64_t cached = 0;  // the entries that are current
  };
  using Pool = std::map<std::int64_t, Bucket>;
  Pool& pool(bool small) { return small ? small_pool_ : large_pool_; }
  void pool_insert(bool small, int b);
  void pool_erase(bool small, int b);
  // The digest's terms: one per block (where it lies, its size, whether free) and per segment size.
  // (place_hash: the address's part, computed once where only the size or the free bit changes.)
  std::uint64_t block_hash(int b) const;
  std::uint64_t place_hash(int b) const;
  static std::uint64_t block_hash(std::uint64_t place, std::int64_t size, bool free);
  static std::uint64_t segment_hash(int seg, std::int64_t size);
  std::int64_t address(int b) const;
  int new_block();
  int take_free_block(bool small, std::int64_t size);
  int new_segment(bool small, std::int64_t segment_size);
  int grow_expandable(bool small, std::int64_t size);
  void split(int b, std::int64_t size, bool small);
  void merge_into(int b, int other);
  void note_peaks();

  AllocatorConfig config_;
  std::vector<Block> blocks_;
  std::vector<int> recycled_;
  std::vector<Segment> segments_;
  int expandable_segment_[2] = {-1, -1};  // large, small
  Pool small_pool_, large_pool_;
  std::int64_t reserved_ = 0, allocated_ = 0, requested_ = 0;
  std::int64_t peak_reserved_ = 0, peak_allocated_ = 0, peak_requested_ = 0;
  std::uint64_t digest_ = 0;
};

}  // namespace mme
