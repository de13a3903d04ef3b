/*
 * test_assign.c - who reads what across processes (ACCEPTANCE H): greedy
 * by size to the least-loaded eligible process, fewer-eligible first, file
 * locality and hints, and broadcast batches bounded by memory.
 */
#include <string.h>

#include "harness.h"
#include "pl_fake.h"

static const uint32_t all4[] = { 0, 1, 2, 3 };

static void h1_greedy_by_size(void)
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

static void h2_fewer_eligible_first(void)
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

static void h3_file_locality(void)
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

static void h4_batches(void)
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

/* Read once: every item read by exactly one eligible process; loads add up. */
static void h4_read_once_property(void)
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

int main(void)
{
	th_seed();
	RUN(h1_greedy_by_size);
	RUN(h2_fewer_eligible_first);
	RUN(h3_file_locality);
	RUN(h4_batches);
	RUN(h4_read_once_property);
	return th_done();
}
