// SPDX-License-Identifier: Apache-2.0
// choose_parts and part_range: how a message is spread over a connection's data sockets.
#include "transport/tcp/chunking.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mesh::tcp {
namespace {

static_assert(kPartAlign == 128);

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * KiB;

TEST(ChooseParts, InlineThresholdIsInclusive) {
  EXPECT_EQ(choose_parts(65536, 4, 131072, 65536), 0u);
  EXPECT_EQ(choose_parts(65537, 4, 131072, 65536), 1u);
  EXPECT_EQ(choose_parts(0, 4, 131072, 65536), 0u);
  EXPECT_EQ(choose_parts(1, 4, 131072, 65536), 0u);
}

TEST(ChooseParts, InlineZeroSendsOnlyEmptyMessagesInline) {
  EXPECT_EQ(choose_parts(0, 4, 131072, 0), 0u);
  EXPECT_EQ(choose_parts(1, 4, 131072, 0), 1u);
}

TEST(ChooseParts, OnePartPerMinChunk) {
  EXPECT_EQ(choose_parts(131072, 4, 131072, 65536), 1u);
  EXPECT_EQ(choose_parts(262143, 4, 131072, 65536), 1u);  // rounds down
  EXPECT_EQ(choose_parts(262144, 4, 131072, 65536), 2u);
  EXPECT_EQ(choose_parts(393216, 4, 131072, 65536), 3u);
  EXPECT_EQ(choose_parts(524287, 4, 131072, 65536), 3u);
  EXPECT_EQ(choose_parts(524288, 4, 131072, 65536), 4u);
  EXPECT_EQ(choose_parts(200000, 64, 4096, 0), 48u);  // 200000 / 4096 = 48.8
}

TEST(ChooseParts, AtLeastOnePartAboveTheInlineThreshold) {
  // Smaller than one min_chunk but too big to inline: one data socket.
  EXPECT_EQ(choose_parts(70000, 4, 1 * MiB, 65536), 1u);
  EXPECT_EQ(choose_parts(4095, 8, 4096, 0), 1u);
}

TEST(ChooseParts, ClampedToTheNumberOfDataSockets) {
  EXPECT_EQ(choose_parts(1024 * MiB, 4, 131072, 65536), 4u);
  EXPECT_EQ(choose_parts(1 * MiB, 64, 4096, 0), 64u);  // 256 by size
  EXPECT_EQ(choose_parts(1024 * MiB, 1, 4096, 0), 1u);
  EXPECT_EQ(choose_parts(SIZE_MAX, 16, 4096, 0), 16u);
}

TEST(ChooseParts, NoDataSocketsMeansInline) {
  EXPECT_EQ(choose_parts(1 * MiB, 0, 4096, 0), 0u);
  EXPECT_EQ(choose_parts(1024 * MiB, 0, 131072, 65536), 0u);
}

TEST(ChooseParts, MinChunkZeroUsesEverySocket) {
  EXPECT_EQ(choose_parts(1 * MiB, 4, 0, 0), 4u);
  EXPECT_EQ(choose_parts(100, 4, 0, 0), 4u);
  EXPECT_EQ(choose_parts(100, 4, 0, 100), 0u);
}

void expect_part(size_t size, uint32_t nparts, uint32_t index, size_t offset, size_t length) {
  const PartRange r = part_range(size, nparts, index);
  EXPECT_EQ(r.offset, offset) << "size " << size << " part " << index << "/" << nparts;
  EXPECT_EQ(r.length, length) << "size " << size << " part " << index << "/" << nparts;
}

TEST(PartRange, SinglePartIsTheWholeMessage) {
  expect_part(1000, 1, 0, 0, 1000);
  expect_part(0, 1, 0, 0, 0);
  expect_part(1, 1, 0, 0, 1);
  expect_part(0, 0, 0, 0, 0);
  expect_part(777, 0, 0, 0, 777);  // 0 parts (inline) also covers the message
}

TEST(PartRange, EvenSplit) {
  expect_part(1024, 4, 0, 0, 256);
  expect_part(1024, 4, 1, 256, 256);
  expect_part(1024, 4, 2, 512, 256);
  expect_part(1024, 4, 3, 768, 256);
}

TEST(PartRange, LastPartTakesTheRemainder) {
  // 1000 / 2 = 500 -> 384 (aligned down to 128).
  expect_part(1000, 2, 0, 0, 384);
  expect_part(1000, 2, 1, 384, 616);
  // 1000 / 3 = 333 -> 256.
  expect_part(1000, 3, 0, 0, 256);
  expect_part(1000, 3, 1, 256, 256);
  expect_part(1000, 3, 2, 512, 488);
  // 1 MiB + 1 over 4: 262144 each, the last one byte longer.
  expect_part(MiB + 1, 4, 0, 0, 262144);
  expect_part(MiB + 1, 4, 3, 786432, 262145);
}

TEST(PartRange, SmallSizesWithZeroAlignedBase) {
  // 100 / 4 = 25 -> 0: every part but the last is empty and the last carries everything.
  expect_part(100, 4, 0, 0, 0);
  expect_part(100, 4, 1, 0, 0);
  expect_part(100, 4, 2, 0, 0);
  expect_part(100, 4, 3, 0, 100);
  // 511 / 4 = 127 -> 0; 512 / 4 = 128 is the first size with a non-empty base.
  expect_part(511, 4, 0, 0, 0);
  expect_part(511, 4, 3, 0, 511);
  expect_part(512, 4, 0, 0, 128);
  expect_part(512, 4, 3, 384, 128);
  // Empty message over several parts.
  expect_part(0, 3, 0, 0, 0);
  expect_part(0, 3, 2, 0, 0);
}

TEST(PartRange, SixtyFourBitSizes) {
  const size_t size = (size_t{1} << 40) + 5;  // 1 TiB + 5
  expect_part(size, 4, 0, 0, size_t{1} << 38);
  expect_part(size, 4, 1, size_t{1} << 38, size_t{1} << 38);
  expect_part(size, 4, 2, size_t{1} << 39, size_t{1} << 38);
  expect_part(size, 4, 3, 3 * (size_t{1} << 38), (size_t{1} << 38) + 5);
}

TEST(PartRange, PartsTileTheMessageExactly) {
  std::vector<size_t> sizes;
  for (size_t s = 0; s <= 2048; ++s) sizes.push_back(s);
  for (size_t s : {4095, 4096, 4097, 65535, 65536, 65537, 131071, 131072, 1000003, 16777216,
                   16777217, 1073741823}) {
    sizes.push_back(s);
  }
  for (const size_t size : sizes) {
    for (uint32_t nparts = 1; nparts <= 64; ++nparts) {
      size_t next = 0;
      size_t base = 0;
      for (uint32_t i = 0; i < nparts; ++i) {
        const PartRange r = part_range(size, nparts, i);
        ASSERT_EQ(r.offset, next) << "size " << size << " part " << i << "/" << nparts;
        ASSERT_LE(r.length, size - r.offset) << "size " << size << " part " << i << "/" << nparts;
        if (i + 1 < nparts) {
          // All but the last part: the same length, a multiple of kPartAlign.
          ASSERT_EQ(r.length % kPartAlign, 0u) << "size " << size << " part " << i;
          ASSERT_EQ(r.offset % kPartAlign, 0u) << "size " << size << " part " << i;
          if (i == 0) base = r.length;
          ASSERT_EQ(r.length, base) << "size " << size << " part " << i;
          ASSERT_LE(r.length * nparts, size) << "size " << size << " part " << i;
        } else {
          if (nparts == 1) {
            ASSERT_EQ(r.length, size);
          } else {
            // At least as long as the others, and less than kPartAlign more per part: the
            // split stays balanced.
            ASSERT_GE(r.length, base) << "size " << size << " nparts " << nparts;
            ASSERT_LT(r.length, base + kPartAlign * nparts)
                << "size " << size << " nparts " << nparts;
          }
        }
        next = r.offset + r.length;
      }
      ASSERT_EQ(next, size) << "size " << size << " nparts " << nparts;
    }
  }
}

TEST(PartRange, ChosenPartsAreNeverEmpty) {
  // With the settings' lower bound on min_chunk (4096), every part choose_parts asks for has
  // data, whatever the message size.
  for (const size_t ndata : {1, 2, 3, 4, 8, 64}) {
    for (size_t size = 4096; size < 8 * MiB; size = size * 3 / 2 + 1) {
      const uint32_t nparts = choose_parts(size, ndata, 4096, 0);
      ASSERT_GE(nparts, 1u);
      for (uint32_t i = 0; i < nparts; ++i) {
        ASSERT_GT(part_range(size, nparts, i).length, 0u)
            << "size " << size << " ndata " << ndata << " part " << i;
      }
    }
  }
}

}  // namespace
}  // namespace mesh::tcp
