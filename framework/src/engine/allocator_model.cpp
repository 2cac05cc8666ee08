// PyTorch's CUDA caching allocator, modelled (allocator_model.hpp). Each rule names the function
// of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator) or c10/cuda/CUDAAllocatorConfig.cpp
// it follows (PyTorch 2.x).
#include "allocator_model.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

#include <fmt/core.h>

#include "mme/sdk/error.hpp"
#include "mme/sdk/number_text.hpp"

namespace mme {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::int64_t conf_integer(std::string_view key, std::string_view value) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < 0)
    throw UsageError(fmt::format("PYTORCH_CUDA_ALLOC_CONF: {} '{}' is not a non-negative integer", key, value));
  return v;
}

}  // namespace

AllocatorConfig parse_alloc_conf(std::string_view text) {
  // CUDAAllocatorConfig::parseArgs: "key:value" pairs separated by commas (or spaces).
  AllocatorConfig c;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw UsageError(fmt::format("PYTORCH_CUDA_ALLOC_CONF: '{}' is not of the form key:value", item));
    const std::string_view key = trim(item.substr(0, colon)), value = trim(item.substr(colon + 1));
    if (key == "max_split_size_mb") {
      // parseMaxSplitSize: at least kLargeBuffer / 1 MiB + 1 = 21.
      const std::int64_t mb = conf_integer(key, value);
      if (mb <= kAllocLargeBuffer >> 20)
        throw UsageError(fmt::format("PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb {} is too small (must be > {})", mb,
                                     kAllocLargeBuffer >> 20));
      c.max_split_size = mb >= (kAllocNoSplitLimit >> 20) ? kAllocNoSplitLimit : mb << 20;
    } else if (key == "roundup_power2_divisions") {
      // parseRoundUpPower2Divisions: one power of two for every size; the per-size list form
      // ("[256:1,>:4]") is not modelled.
      if (!value.empty() && value.front() == '[')
        throw UsageError(
            "PYTORCH_CUDA_ALLOC_CONF: the per-size list form of roundup_power2_divisions is not modelled (give one "
            "power of two)");
      const std::int64_t n = conf_integer(key, value);
      if (n != 0 && !std::has_single_bit(static_cast<std::uint64_t>(n)))
        throw UsageError(fmt::format("PYTORCH_CUDA_ALLOC_CONF: roundup_power2_divisions {} is not a power of 2", n));
      c.roundup_power2_divisions = n;
    } else if (key == "garbage_collection_threshold") {
      // parseGarbageCollectionThreshold: 0 < t < 1.
      // The same under every locale and in the page (number_text.hpp).
      const std::optional<double> parsed = parse_decimal(value);
      const double t = parsed.value_or(0.0);
      if (!parsed || !(t > 0.0) || !(t < 1.0))
        throw UsageError(fmt::format(
            "PYTORCH_CUDA_ALLOC_CONF: garbage_collection_threshold '{}' must be a number between 0 and 1", value));
      c.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      // parseExpandableSegments: exactly True or False.
      if (value != "True" && value != "False")
        throw UsageError(
            fmt::format("PYTORCH_CUDA_ALLOC_CONF: expandable_segments '{}' is neither True nor False", value));
      c.expandable_segments = value == "True";
    } else if (key == "backend") {
      if (value != "native" && value != "cudaMallocAsync")
        throw UsageError(
            fmt::format("PYTORCH_CUDA_ALLOC_CONF: backend '{}' is neither native nor cudaMallocAsync", value));
      c.async_backend = value == "cudaMallocAsync";
    } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
               key == "pinned_num_register_threads" || key == "pinned_use_background_threads" ||
               key == "graph_capture_record_stream_reuse") {
      // Locking, pinned host memory, graph-capture bookkeeping: no effect on the device's segments.
    } else {
      throw UsageError(fmt::format(
          "PYTORCH_CUDA_ALLOC_CONF: unknown option '{}' (known: max_split_size_mb, roundup_power2_divisions, "
          "garbage_collection_threshold, expandable_segments, backend, release_lock_on_cudamalloc, pinned_*)",
          key));
    }
  }
  return c;
}

std::int64_t allocator_round_size(std::int64_t size, const AllocatorConfig& config) {
  // DeviceCachingAllocator::round_size.
  if (size < kAllocMinBlockSize) return kAllocMinBlockSize;
  const std::int64_t divisions = config.roundup_power2_divisions;
  if (divisions > 1 && size > kAllocMinBlockSize * divisions) {
    // roundup_power2_next_division: the next of `divisions` equal steps between two powers of 2.
    const auto u = static_cast<std::uint64_t>(size);
    if (std::has_single_bit(u)) return size;
    const std::uint64_t floor2 = std::bit_floor(u);
    const std::uint64_t step = floor2 >> std::countr_zero(static_cast<std::uint64_t>(divisions));
    if (step == 0) return static_cast<std::int64_t>(floor2 << 1);
    const std::uint64_t down = u & ~(step - 1);
    return static_cast<std::int64_t>(down == u ? u : down + step);
  }
  return kAllocMinBlockSize * ((size + kAllocMinBlockSize - 1) / kAllocMinBlockSize);
}

std::int64_t allocator_segment_size(std::int64_t size) {
  // DeviceCachingAllocator::get_allocation_size.
  if (size <= kAllocSmallSize) return kAllocSmallBuffer;
  if (size < kAllocMinLargeAlloc) return kAllocLargeBuffer;
  return kAllocRoundLarge * ((size + kAllocRoundLarge - 1) / kAllocRoundLarge);
}

CachingAllocatorModel::CachingAllocatorModel(const AllocatorConfig& config) : config_(config) {}

std::int64_t CachingAllocatorModel::address(int b) const {
  // Segments lie 16 TiB apart, in the order they were created (a stand-in for cudaMalloc's addresses).
  return (static_cast<std::int64_t>(blocks_[static_cast<std::size_t>(b)].segment) << 44) +
         blocks_[static_cast<std::size_t>(b)].offset;
}

namespace {

// splitmix64's finalizer: spreads a value over 64 bits, so sums of hashes rarely collide.
std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t CachingAllocatorModel::place_hash(int b) const { return mix64(static_cast<std::uint64_t>(address(b))); }

std::uint64_t CachingAllocatorModel::block_hash(std::uint64_t place, std::int64_t size, bool free) {
  return mix64(place ^ (static_cast<std::uint64_t>(size) * 2 + (free ? 1 : 0)));
}

std::uint64_t CachingAllocatorModel::block_hash(int b) const {
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  return block_hash(place_hash(b), blk.size, blk.free);
}

std::uint64_t CachingAllocatorModel::segment_hash(int seg, std::int64_t size) {
  return mix64(mix64(~static_cast<std::uint64_t>(seg)) + static_cast<std::uint64_t>(size));
}

namespace {

// The heap order: the lowest address on top.
bool higher_address(const auto& a, const auto& b) { return a.address > b.address; }

}  // namespace

void CachingAllocatorModel::pool_insert(bool small, int b) {
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  blk.pooled = true;
  ++blk.pool_entry;
  Bucket& bucket = pool(small)[blk.size];
  bucket.heap.push_back({address(b), b, blk.pool_entry});
  std::push_heap(bucket.heap.begin(), bucket.heap.end(), higher_address<Entry, Entry>);
  ++bucket.cached;
}

void CachingAllocatorModel::pool_erase(bool small, int b) {
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  if (!blk.pooled) return;
  blk.pooled = false;
  auto& p = pool(small);
  const auto it = p.find(blk.size);
  if (it == p.end()) return;
  Bucket& bucket = it->second;
  if (--bucket.cached == 0) {
    p.erase(it);
    return;
  }
  // Stale entries past twice the current ones: the heap keeps only the current ones.
  if (bucket.heap.size() > 2 * static_cast<std::size_t>(bucket.cached) + 64) {
    std::erase_if(bucket.heap, [&](const Entry& e) {
      const Block& x = blocks_[static_cast<std::size_t>(e.block)];
      return !x.pooled || x.pool_entry != e.serial;
    });
    std::make_heap(bucket.heap.begin(), bucket.heap.end(), higher_address<Entry, Entry>);
  }
}

int CachingAllocatorModel::new_block() {
  if (!recycled_.empty()) {
    const int b = recycled_.back();
    recycled_.pop_back();
    // The slot's entry count goes on, so that an old entry of the slot never looks current.
    const std::uint32_t serial = blocks_[static_cast<std::size_t>(b)].pool_entry;
    blocks_[static_cast<std::size_t>(b)] = Block{};
    blocks_[static_cast<std::size_t>(b)].live = true;
    blocks_[static_cast<std::size_t>(b)].pool_entry = serial;
    return b;
  }
  blocks_.push_back(Block{});
  blocks_.back().live = true;
  return static_cast<int>(blocks_.size() - 1);
}

int CachingAllocatorModel::take_free_block(bool small, std::int64_t size) {
  // get_free_block: the smallest cached block of at least `size` (BlockComparatorSize: size, then
  // address), unless it is an oversized block (max_split_size) that must not serve this request.
  auto& p = pool(small);
  const auto it = p.lower_bound(size);
  if (it == p.end()) return -1;
  const std::int64_t found = it->first;
  const std::int64_t limit = config_.max_split_size;
  if (size < limit && found >= limit) return -1;                      // no oversized block for a small request
  if (size >= limit && found >= size + kAllocLargeBuffer) return -1;  // an oversized one only within 20 MiB
  // The lowest address of that size: the current entry on top of the heap (a bucket in the map
  // always has one).
  auto& heap = it->second.heap;
  for (;;) {
    const Entry top = heap.front();
    std::pop_heap(heap.begin(), heap.end(), higher_address<Entry, Entry>);
    heap.pop_back();
    const Block& blk = blocks_[static_cast<std::size_t>(top.block)];
    if (blk.pooled && blk.pool_entry == top.serial) {
      pool_erase(small, top.block);
      return top.block;
    }
  }
}

int CachingAllocatorModel::new_segment(bool small, std::int64_t segment_size) {
  // alloc_block: cudaMalloc of get_allocation_size(); the whole segment is one block.
  Segment s;
  s.size = segment_size;
  s.small = small;
  segments_.push_back(s);
  const int seg = static_cast<int>(segments_.size() - 1);
  const int b = new_block();
  auto& blk = blocks_[static_cast<std::size_t>(b)];
  blk.segment = seg;
  blk.size = segment_size;
  segments_.back().first = segments_.back().last = b;
  reserved_ += segment_size;
  digest_ += segment_hash(seg, segment_size) + block_hash(b);
  return b;
}

int CachingAllocatorModel::grow_expandable(bool small, std::int64_t size) {
  // try_allocate_expandable_block / ExpandableSegment::map: one growing address range per pool,
  // mapped in pages of kLargeBuffer (kSmallBuffer for the small pool); a free block at the mapped
  // end is extended by just the pages the request lacks.
  const std::int64_t page = small ? kAllocSmallBuffer : kAllocLargeBuffer;
  int& seg = expandable_segment_[small ? 1 : 0];
  if (seg < 0) {
    Segment s;
    s.small = small;
    s.expandable = true;
    segments_.push_back(s);
    seg = static_cast<int>(segments_.size() - 1);
    digest_ += segment_hash(seg, 0);
  }
  Segment& s = segments_[static_cast<std::size_t>(seg)];
  const int tail = s.last;
  const bool tail_free = tail >= 0 && blocks_[static_cast<std::size_t>(tail)].free;
  const std::int64_t have = tail_free ? blocks_[static_cast<std::size_t>(tail)].size : 0;
  const std::int64_t map = (size - have + page - 1) / page * page;
  const std::int64_t old_size = s.size;
  s.size += map;
  reserved_ += map;
  digest_ += segment_hash(seg, s.size) - segment_hash(seg, old_size);
  if (tail_free) {
    pool_erase(small, tail);
    digest_ -= block_hash(tail);
    blocks_[static_cast<std::size_t>(tail)].size += map;
    digest_ += block_hash(tail);
    return tail;
  }
  const int b = new_block();
  auto& blk = blocks_[static_cast<std::size_t>(b)];
  blk.segment = seg;
  blk.offset = old_size;
  blk.size = map;
  blk.prev = tail;
  if (tail >= 0) blocks_[static_cast<std::size_t>(tail)].next = b;
  if (s.first < 0) s.first = b;
  s.last = b;
  digest_ += block_hash(b);
  return b;
}

void CachingAllocatorModel::split(int b, std::int64_t size, bool small) {
  // malloc: the request keeps the block's start, the remainder becomes a cached block after it.
  const int r = new_block();
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  const std::uint64_t place = place_hash(b);
  digest_ -= block_hash(place, blk.size, blk.free);
  Block& rem = blocks_[static_cast<std::size_t>(r)];
  rem.segment = blk.segment;
  rem.offset = blk.offset + size;
  rem.size = blk.size - size;
  rem.prev = b;
  rem.next = blk.next;
  if (blk.next >= 0) blocks_[static_cast<std::size_t>(blk.next)].prev = r;
  blk.next = r;
  blk.size = size;
  Segment& s = segments_[static_cast<std::size_t>(blk.segment)];
  if (s.last == b) s.last = r;
  digest_ += block_hash(place, blk.size, blk.free) + block_hash(r);
  pool_insert(small, r);
}

int CachingAllocatorModel::malloc(std::int64_t bytes) {
  if (bytes <= 0) return -1;
  if (!config_.caching) {
    // PYTORCH_NO_CUDA_MEMORY_CACHING: cudaMalloc and cudaFree for each tensor, nothing cached.
    const int b = new_segment(false, bytes);
    digest_ -= block_hash(b);
    blocks_[static_cast<std::size_t>(b)].free = false;
    digest_ += block_hash(b);
    blocks_[static_cast<std::size_t>(b)].requested = bytes;
    allocated_ += bytes;
    requested_ += bytes;
    note_peaks();
    return b;
  }
  const std::int64_t size = allocator_round_size(bytes, config_);
  const bool small = size <= kAllocSmallSize;  // get_pool
  int b = take_free_block(small, size);
  if (b < 0)
    b = config_.expandable_segments ? grow_expandable(small, size) : new_segment(small, allocator_segment_size(size));
  // should_split: the small pool and expandable segments split any remainder of 512 B or more; a
  // large block only for a request below max_split_size and a remainder above kSmallSize.
  const std::int64_t remaining = blocks_[static_cast<std::size_t>(b)].size - size;
  const bool do_split = (small || config_.expandable_segments)
                            ? remaining >= kAllocMinBlockSize
                            : size < config_.max_split_size && remaining > kAllocSmallSize;
  if (do_split) split(b, size, small);
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  const std::uint64_t place = place_hash(b);
  digest_ += block_hash(place, blk.size, false) - block_hash(place, blk.size, true);
  blk.free = false;
  blk.requested = bytes;
  allocated_ += blk.size;
  requested_ += bytes;
  note_peaks();
  return b;
}

void CachingAllocatorModel::merge_into(int b, int other) {
  // try_merge_blocks: a free neighbour joins the freed block; its cache entry goes.
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  Block& o = blocks_[static_cast<std::size_t>(other)];
  const bool small = segments_[static_cast<std::size_t>(blk.segment)].small;
  pool_erase(small, other);
  digest_ -= block_hash(b) + block_hash(other);
  Segment& s = segments_[static_cast<std::size_t>(blk.segment)];
  if (o.next == b) {  // other lies before b
    blk.offset = o.offset;
    blk.prev = o.prev;
    if (o.prev >= 0) blocks_[static_cast<std::size_t>(o.prev)].next = b;
    if (s.first == other) s.first = b;
  } else {  // other lies after b
    blk.next = o.next;
    if (o.next >= 0) blocks_[static_cast<std::size_t>(o.next)].prev = b;
    if (s.last == other) s.last = b;
  }
  blk.size += o.size;
  o.live = false;
  recycled_.push_back(other);
  digest_ += block_hash(b);
}

void CachingAllocatorModel::free(int handle) {
  if (handle < 0) return;
  Block& blk = blocks_[static_cast<std::size_t>(handle)];
  if (!blk.live || blk.free) return;
  const std::uint64_t place = place_hash(handle);
  digest_ -= block_hash(place, blk.size, false);
  blk.free = true;
  requested_ -= blk.requested;
  if (!config_.caching) {
    allocated_ -= blk.size;
    reserved_ -= blk.size;
    Segment& seg = segments_[static_cast<std::size_t>(blk.segment)];
    digest_ += segment_hash(blk.segment, 0) - segment_hash(blk.segment, seg.size);
    seg.size = 0;
    blk.live = false;
    recycled_.push_back(handle);
    return;
  }
  allocated_ -= blk.size;
  digest_ += block_hash(place, blk.size, true);
  // free_block: merge with free neighbours of the same segment, then cache the block. Cached
  // segments are never given back here (only empty_cache() or an out-of-memory retry does).
  for (const int nb : {blk.prev, blk.next}) {
    if (nb >= 0 && blocks_[static_cast<std::size_t>(nb)].free) merge_into(handle, nb);
  }
  const bool small = segments_[static_cast<std::size_t>(blocks_[static_cast<std::size_t>(handle)].segment)].small;
  pool_insert(small, handle);
}

void CachingAllocatorModel::empty_cache() {
  // release_cached_blocks -> release_blocks (CUDACachingAllocator.cpp): for each pool, every
  // cached block with no neighbour (block->prev == nullptr && block->next == nullptr: the whole
  // segment) is cudaFree'd.
  for (const bool small : {false, true}) {
    std::vector<int> whole;
    for (const auto& [size, bucket] : pool(small))
      for (const Entry& e : bucket.heap) {
        const Block& blk = blocks_[static_cast<std::size_t>(e.block)];
        if (!blk.pooled || blk.pool_entry != e.serial) continue;
        if (!segments_[static_cast<std::size_t>(blk.segment)].expandable && blk.prev < 0 && blk.next < 0)
          whole.push_back(e.block);
      }
    for (const int b : whole) {
      pool_erase(small, b);
      Block& blk = blocks_[static_cast<std::size_t>(b)];
      Segment& seg = segments_[static_cast<std::size_t>(blk.segment)];
      digest_ -= block_hash(b);
      digest_ += segment_hash(blk.segment, 0) - segment_hash(blk.segment, seg.size);
      reserved_ -= seg.size;
      seg.size = 0;
      seg.first = seg.last = -1;
      blk.live = false;
      recycled_.push_back(b);
    }
  }
}

void CachingAllocatorModel::note_peaks() {
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  peak_requested_ = std::max(peak_requested_, requested_);
}

std::size_t CachingAllocatorModel::segments() const {
  return static_cast<std::size_t>(
      std::count_if(segments_.begin(), segments_.end(), [](const Segment& s) { return s.size > 0; }));
}

}  // namespace mme
