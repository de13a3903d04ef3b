/* verdict.c - ringload's verdict per file, in the reference's variant names. */
#include <stdio.h>
#include <string.h>
#include "ringload.h"
static const char *variant(int r) {
	switch (r) {
	case RL_E_HEADER_TOO_SMALL: return "HeaderTooSmall";
	case RL_E_HEADER_TOO_LARGE: return "HeaderTooLarge";
	case RL_E_HEADER_LENGTH: return "InvalidHeaderLength";
	case RL_E_HEADER_UTF8: return "InvalidHeader";
	case RL_E_HEADER_JSON: return "InvalidHeaderDeserialization";
	case RL_E_INVALID_OFFSET: return "InvalidOffset";
	case RL_E_OVERFLOW: return "ValidationOverflow";
	case RL_E_MISALIGNED: return "MisalignedSlice";
	case RL_E_SIZE_MISMATCH: return "TensorInvalidInfo";
	case RL_E_INCOMPLETE: case RL_E_TRUNCATED: return "MetadataIncompleteBuffer";
	default: return "OTHER";
	}
}
int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		rl_ckpt *ck = rl_ckpt_create();
		int r = rl_ckpt_open(ck, argv[i]);
		if (r == 0)
			printf("%s\tok %zu\n", argv[i], rl_ckpt_num_tensors(ck));
		else if (strstr(rl_ckpt_errmsg(ck), "ringload cannot represent") ||
			 strstr(rl_ckpt_errmsg(ck), "ringload's limit"))
			printf("%s\tlimit\n", argv[i]); /* a documented difference */
		else
			printf("%s\terr %s\n", argv[i], variant(r));
		rl_ckpt_destroy(ck);
	}
}
