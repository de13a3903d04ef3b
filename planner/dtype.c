/*
 * dtype.c - the safetensors element types: names and sizes in bits.
 *
 * The names are exactly those the reference's `Dtype` enum deserializes
 * (safetensors/src/tensor.rs); the table is indexed by rl_dtype, whose
 * values never change (new types are appended).
 */
#include <string.h>

#include "planner.h"

static const struct {
	const char *name;
	unsigned bits;
} dtypes[RL_DTYPE_COUNT] = {
	[RL_DTYPE_BOOL] = { "BOOL", 8 },
	[RL_DTYPE_U8] = { "U8", 8 },
	[RL_DTYPE_I8] = { "I8", 8 },
	[RL_DTYPE_F8_E5M2] = { "F8_E5M2", 8 },
	[RL_DTYPE_F8_E4M3] = { "F8_E4M3", 8 },
	[RL_DTYPE_F8_E8M0] = { "F8_E8M0", 8 },
	[RL_DTYPE_I16] = { "I16", 16 },
	[RL_DTYPE_U16] = { "U16", 16 },
	[RL_DTYPE_F16] = { "F16", 16 },
	[RL_DTYPE_BF16] = { "BF16", 16 },
	[RL_DTYPE_I32] = { "I32", 32 },
	[RL_DTYPE_U32] = { "U32", 32 },
	[RL_DTYPE_F32] = { "F32", 32 },
	[RL_DTYPE_F64] = { "F64", 64 },
	[RL_DTYPE_I64] = { "I64", 64 },
	[RL_DTYPE_U64] = { "U64", 64 },
	[RL_DTYPE_F4] = { "F4", 4 },
	[RL_DTYPE_F6_E2M3] = { "F6_E2M3", 6 },
	[RL_DTYPE_F6_E3M2] = { "F6_E3M2", 6 },
	[RL_DTYPE_C64] = { "C64", 64 },
	[RL_DTYPE_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8 },
	[RL_DTYPE_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8 },
};

unsigned pl_dtype_bits(int dt)
{
	if (dt < 0 || dt >= RL_DTYPE_COUNT)
		return 0;
	return dtypes[dt].bits;
}

const char *pl_dtype_name(int dt)
{
	if (dt < 0 || dt >= RL_DTYPE_COUNT)
		return NULL;
	return dtypes[dt].name;
}

int pl_dtype_lookup(const char *name, size_t len)
{
	for (int i = 0; i < RL_DTYPE_COUNT; i++)
		if (strlen(dtypes[i].name) == len && !memcmp(dtypes[i].name, name, len))
			return i;
	return -1;
}
