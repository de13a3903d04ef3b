/*
 * test_assign.c - who reads what across processes (ACCEPTANCE H and R):
 * greedy by size to the least-loaded eligible process, fewer-eligible
 * first, file locality and hints, transfer batches bounded by memory, and
 * water-filling: one contiguous, balanced share per reader, cut at the
 * alignment.
 */
#include <string.h>

#include "harness.h"
#include "pl_fake.h"
#include "../planner/pl_private.h"

static const uint32_t all4[] = { 0, 1, 2, 3 };

/* H.1: sizes 100, 80, 60, 40, 20 over 4 processes: loads 100, 80, 60, 60. */
static void greedy_by_size_to_least_loaded(void)
{
	uint64_t sizes[] = { 100, 80, 60, 40, 20 }, load[4] = { 0 };
	struct pl_assign_item it[5];
	int32_t owner[5];

	for (int i = 0; i < 5; i++)
		it[i] = (struct pl_assign_item){ sizes[i], 0, -1, all4, 4 };
	CHECK_EQ(pl_assign(it, 5, 4, NULL, 0, owner, load), 0);
	CHECK_EQ(load[0], 100);
	CHECK_EQ(load[1], 80);
	CHECK_EQ(load[2], 60);
	CHECK_EQ(load[3], 60);
	CHECK_EQ(owner[4], 3);
	/* Ties to the lowest process; the input order does not matter. */
	memset(load, 0, sizeof(load));
	for (int i = 0; i < 5; i++)
		it[i] = (struct pl_assign_item){ sizes[4 - i], 0, -1, all4, 4 };
	CHECK_EQ(pl_assign(it, 5, 4, NULL, 0, owner, load), 0);
	CHECK_EQ(owner[4], 0);
	CHECK_EQ(owner[0], 3);
	CHECK_EQ(load[3], 60);
}

/* H.2 */
static void fewer_eligible_first_nobody_eligible_gets_none(void)
{
	/* The big item could go anywhere; the small one only to process 0.
	 * Placed first, the small one takes 0, and the big one goes to 1. */
	static const uint32_t only0[] = { 0 }, both[] = { 0, 1 };
	struct pl_assign_item it[] = { { 100, 0, -1, both, 2 }, { 10, 0, -1, only0, 1 } };
	uint64_t load[2] = { 0 };
	int32_t owner[2];

	CHECK_EQ(pl_assign(it, 2, 2, NULL, 0, owner, load), 0);
	CHECK_EQ(owner[1], 0);
	CHECK_EQ(owner[0], 1);
	/* Nobody eligible: -1. */
	it[1].nelig = 0;
	memset(load, 0, sizeof(load));
	CHECK_EQ(pl_assign(it, 2, 2, NULL, 0, owner, load), 0);
	CHECK_EQ(owner[1], -1);
	CHECK_EQ(owner[0], 0);
}

/* H.3 */
static void file_locality_first_and_eligible_hints_win(void)
{
	/* Process 2 already reads file 1, process 1 file 0. */
	uint8_t reads[4 * 2] = { 0 };
	struct pl_assign_item it[] = {
		{ 10, 1, -1, all4, 4 }, { 20, 1, -1, all4, 4 }, { 5, 0, -1, all4, 4 },
		{ 7, 2, 3, all4, 4 }, { 7, 2, 9, all4, 4 },
	};
	uint64_t load[4] = { 0 };
	int32_t owner[5];

	reads[2 * 2 + 1] = 1;
	reads[1 * 2 + 0] = 1;
	CHECK_EQ(pl_assign(it, 5, 4, reads, 2, owner, load), 0);
	CHECK_EQ(owner[0], 2);          /* file 1's group (30 B) goes to its reader */
	CHECK_EQ(owner[1], 2);
	CHECK_EQ(owner[2], 1);
	CHECK_EQ(owner[3], 3);          /* an eligible hint wins */
	CHECK_EQ(owner[4], 0);          /* an ineligible hint: greedy (0 is empty) */
	/* Largest groups first: with no reader, file 1's items come before
	 * file 0's larger single item and take the empty processes. */
	{
		struct pl_assign_item g[] = {
			{ 10, 1, -1, all4, 2 }, { 10, 1, -1, all4, 2 }, { 15, 0, -1, all4, 2 },
		};
		uint64_t l2[2] = { 0 };
		int32_t o2[3];

		CHECK_EQ(pl_assign(g, 3, 2, NULL, 0, o2, l2), 0);
		CHECK_EQ(o2[0], 0);
		CHECK_EQ(o2[1], 1);
		CHECK_EQ(o2[2], 0);
	}
}

/* H.4: batches bounded by a memory limit; one filled exactly stays one. */
static void batches_bounded_oversize_alone(void)
{
	uint64_t sizes[] = { 4, 4, 4, 10, 3, 3, 30, 1 };
	uint32_t batch[8];

	CHECK_EQ(pl_batches(sizes, 8, 10, batch), 6);
	CHECK_EQ(batch[0], 0);
	CHECK_EQ(batch[1], 0);
	CHECK_EQ(batch[2], 1);          /* 12 > 10 */
	CHECK_EQ(batch[3], 2);          /* 4 + 10 > 10: alone */
	CHECK_EQ(batch[4], 3);
	CHECK_EQ(batch[5], 3);
	CHECK_EQ(batch[6], 4);          /* oversize: alone */
	CHECK_EQ(batch[7], 5);          /* and nothing joins it */
	CHECK_EQ(pl_batches(NULL, 0, 10, batch), 0);
}

/* H.4: every item read by exactly one eligible process; loads add up. */
static void every_item_read_by_one_eligible_process(void)
{
	for (int iter = 0; iter < 200; iter++) {
		unsigned np = 1 + (unsigned)(th_rand() % 8);
		size_t n = (size_t)(th_rand() % 50);
		struct pl_assign_item it[50];
		uint32_t elig[50][8];
		int32_t owner[50];
		uint64_t load[8] = { 0 }, total = 0;

		for (size_t i = 0; i < n; i++) {
			uint32_t ne = 0;

			for (unsigned p = 0; p < np; p++)
				if (th_rand() % 2 || (p == np - 1 && !ne))
					elig[i][ne++] = p;
			it[i] = (struct pl_assign_item){ 1 + th_rand() % 1000, 0, -1, elig[i], ne };
			total += it[i].size;
		}
		CHECK_EQ(pl_assign(it, n, np, NULL, 0, owner, load), 0);
		for (size_t i = 0; i < n; i++) {
			int ok = 0;

			for (uint32_t e = 0; e < it[i].nelig; e++)
				ok |= (int32_t)it[i].elig[e] == owner[i];
			CHECK(ok);
		}
		for (unsigned p = 0; p < np; p++)
			total -= load[p];
		CHECK_EQ(total, 0);
	}
}

/* R.1: 192 bytes over two idle readers, no alignment: 96 each, in order. */
static void waterfill_even_split_in_reader_order(void)
{
	struct pl_seg seg[] = { { 1000, 192, 1 } };
	uint32_t rd[] = { 0, 1 };
	uint64_t load[2] = { 0 }, cut[3];

	CHECK_EQ(pl_waterfill(seg, 1, rd, 2, load, cut), 0);
	CHECK_EQ(cut[0], 0);
	CHECK_EQ(cut[1], 96);
	CHECK_EQ(cut[2], 192);
	CHECK_EQ(load[0], 96);
	CHECK_EQ(load[1], 96);
}

/* Loads already there are levelled first: a reader busy with 300 bytes
 * of its own reads gets less. */
static void waterfill_levels_existing_load(void)
{
	struct pl_seg seg[] = { { 0, 600, 1 } };
	uint32_t rd[] = { 0, 1, 2 };
	uint64_t load[3] = { 300, 0, 0 }, cut[4];

	CHECK_EQ(pl_waterfill(seg, 1, rd, 3, load, cut), 0);
	CHECK_EQ(cut[1] - cut[0], 0);           /* level (600 + 300) / 3 = 300 */
	CHECK_EQ(cut[2] - cut[1], 300);
	CHECK_EQ(cut[3] - cut[2], 300);
	CHECK_EQ(load[0], 300);
	CHECK_EQ(load[1], 300);
	CHECK_EQ(load[2], 300);
	/* With 900 to share, everyone rises to 400. */
	seg[0].len = 900;
	load[0] = 300;
	load[1] = load[2] = 0;
	CHECK_EQ(pl_waterfill(seg, 1, rd, 3, load, cut), 0);
	CHECK_EQ(cut[1], 100);
	CHECK_EQ(cut[2], 500);
	seg[0].len = 600;
	/* Someone far above the level gets nothing. */
	load[0] = 10000;
	load[1] = load[2] = 0;
	CHECK_EQ(pl_waterfill(seg, 1, rd, 3, load, cut), 0);
	CHECK_EQ(cut[1], 0);
	CHECK_EQ(cut[2], 300);
	CHECK_EQ(load[0], 10000);
}

/* R.3: cuts move to the nearest alignment boundary (ties down) inside
 * their segment, so shares never split an aligned block; data smaller
 * than a block goes to one reader. */
static void waterfill_cuts_at_alignment(void)
{
	struct pl_seg seg[] = { { 4096 + 100, 3 * 4096, 4096 } };
	struct pl_seg tiny[] = { { 8192 + 10, 6, 4096 } };
	struct pl_seg two[] = { { 0, 4096, 4096 }, { 65536, 4096, 4096 } };
	uint32_t rd[] = { 0, 1, 2 };
	uint64_t load[3] = { 0 }, cut[4];

	CHECK_EQ(pl_waterfill(seg, 1, rd, 2, load, cut), 0);
	/* middle at file offset 4196 + 6144 = 10340: nearest boundary 12288 */
	CHECK_EQ(cut[1], 12288 - 4196);
	CHECK_EQ((seg[0].off + cut[1]) % 4096, 0);
	memset(load, 0, sizeof(load));
	CHECK_EQ(pl_waterfill(tiny, 1, rd, 3, load, cut), 0);
	CHECK((cut[1] == 0 || cut[1] == 6) && (cut[2] == 0 || cut[2] == 6));
	CHECK(load[0] == 6 || load[1] == 6 || load[2] == 6);
	CHECK_EQ(load[0] + load[1] + load[2], 6);
	/* A reader with no share gets no byte, even when the segment starts
	 * off the alignment (rounding the first cut would give it one). */
	load[0] = 1u << 30;
	load[1] = 0;
	seg[0].off = 519;
	seg[0].align = 8;
	CHECK_EQ(pl_waterfill(seg, 1, rd, 2, load, cut), 0);
	CHECK_EQ(cut[1], 0);
	CHECK_EQ(load[0], 1u << 30);
	/* Segments with a gap: positions run over their concatenation. */
	memset(load, 0, sizeof(load));
	CHECK_EQ(pl_waterfill(two, 2, rd, 2, load, cut), 0);
	CHECK_EQ(cut[1], 4096);
	CHECK_EQ(load[0], 4096);
	CHECK_EQ(load[1], 4096);
}

/* Random segments, readers and loads: shares partition the bytes in
 * reader order, loads grow by exactly the shares, and the spread after
 * filling is at most the largest starting gap plus two blocks. */
static void waterfill_random_property(void)
{
	for (int iter = 0; iter < 300; iter++) {
		struct pl_seg seg[8];
		uint32_t rd[8], nr = 1 + (uint32_t)(th_rand() % 8), nseg = 1 + th_rand() % 8;
		uint64_t load[16] = { 0 }, before[16], cut[9], total = 0, off = 0;
		uint64_t align = 1ull << (th_rand() % 13);

		for (uint32_t i = 0; i < nseg; i++) {
			off += th_rand() % 5000;
			seg[i] = (struct pl_seg){ off, 1 + th_rand() % 100000, align };
			off += seg[i].len;
			total += seg[i].len;
		}
		for (uint32_t i = 0; i < nr; i++) {
			rd[i] = 2 * i + (uint32_t)(th_rand() % 2);
			load[rd[i]] = th_rand() % 50000;
		}
		memcpy(before, load, sizeof(load));
		CHECK_EQ(pl_waterfill(seg, nseg, rd, nr, load, cut), 0);
		CHECK_EQ(cut[0], 0);
		CHECK_EQ(cut[nr], total);
		for (uint32_t i = 0; i < nr; i++) {
			CHECK(cut[i] <= cut[i + 1]);
			CHECK_EQ(load[rd[i]] - before[rd[i]], cut[i + 1] - cut[i]);
		}
		{
			uint64_t lo = UINT64_MAX, hi = 0;

			for (uint32_t i = 0; i < nr; i++) {
				lo = CM_MIN(lo, load[rd[i]]);
				if (cut[i + 1] > cut[i])
					hi = CM_MAX(hi, load[rd[i]]);
			}
			CHECKF(hi <= lo + 2 * align + 1, "iter %d: loads %llu..%llu, align %llu",
			       iter, (unsigned long long)lo, (unsigned long long)hi,
			       (unsigned long long)align);
		}
	}
}

int main(void)
{
	th_seed();
	RUN(greedy_by_size_to_least_loaded);
	RUN(fewer_eligible_first_nobody_eligible_gets_none);
	RUN(file_locality_first_and_eligible_hints_win);
	RUN(batches_bounded_oversize_alone);
	RUN(every_item_read_by_one_eligible_process);
	RUN(waterfill_even_split_in_reader_order);
	RUN(waterfill_levels_existing_load);
	RUN(waterfill_cuts_at_alignment);
	RUN(waterfill_random_property);
	return th_done();
}
