/* SPDX-License-Identifier: MIT */
/* The u64 hash map: growth, deletion, tombstone reuse, iteration. */
#include <stdint.h>

#include "check.h"
#include "ptw_util.h"

int main(void)
{
	struct ptw_map m = { 0 };
	CHECK(ptw_map_get(&m, 5) == NULL);
	CHECK(ptw_map_del(&m, 5) == NULL);

	for (uintptr_t k = 1; k <= 10000; k++)
		CHECK(ptw_map_put(&m, k * 4096, (void *)k) == NULL);
	CHECK_EQ(m.count, 10000);
	for (uintptr_t k = 1; k <= 10000; k++)
		CHECK_EQ((uintptr_t)ptw_map_get(&m, k * 4096), k);
	CHECK((uintptr_t)ptw_map_put(&m, 4096, (void *)77) == 1);
	CHECK_EQ((uintptr_t)ptw_map_get(&m, 4096), 77);

	for (uintptr_t k = 1; k <= 10000; k += 2)
		CHECK(ptw_map_del(&m, k * 4096) != NULL);
	CHECK_EQ(m.count, 5000);
	for (uintptr_t k = 1; k <= 10000; k++)
		CHECK((ptw_map_get(&m, k * 4096) != NULL) == (k % 2 == 0));

	/* Churn (tid reuse pattern): tombstones must not make it grow forever. */
	size_t cap = m.cap;
	for (int round = 0; round < 100; round++)
		for (uintptr_t k = 1; k <= 1000; k++) {
			ptw_map_put(&m, 1u << 30 | k, (void *)k);
			ptw_map_del(&m, 1u << 30 | k);
		}
	CHECK(m.cap <= cap * 2);
	CHECK_EQ(m.count, 5000);

	size_t it = 0, n = 0;
	uint64_t key;
	void *val;
	while (ptw_map_next(&m, &it, &key, &val)) {
		CHECK(key % 8192 == 0);
		n++;
	}
	CHECK_EQ(n, 5000);
	ptw_map_free(&m);

	CHECK(ptw_str_hash("a") != ptw_str_hash("b"));
	CHECK(ptw_str_hash("") != 0);
	CHECK_DONE();
}
