// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * decode-check - check kpatch.c's instruction decoder against objdump.
 *
 * lint.sh builds this on the host with kpatch_decode() and its opcode
 * tables cut out of kpatch.c (decoder.h), and feeds it `objdump -d -w` of
 * a vmlinux or of modules.  For every function it decodes the bytes
 * objdump shows, instruction by instruction, and compares each length,
 * and whether objdump's instruction is a direct jmp, a conditional jump
 * (jcc, loop, jrcxz), an indirect jump or a ret, with what kpatch_decode() says.  An
 * instruction kpatch_decode() does not decode ends that function's check
 * (kpatch then reads on byte by byte, which is safe, but slower); those
 * are counted and listed, not failed.
 *
 * Exit status: 0 if every decoded length and kind agreed, 1 otherwise.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "decoder.h"

#define MAX_BYTES	(1 << 20)
#define MAX_INSNS	(1 << 18)

static unsigned char bytes[MAX_BYTES];
static unsigned int lens[MAX_INSNS];
static char kinds[MAX_INSNS];
static char name[512];
static unsigned long nbytes, ninsns;
static unsigned long functions, insns, bad, undecoded;

/* What objdump's mnemonic says: J jmp, C jcc, I indirect, R ret, o other */
static char objdump_kind(const char *asm_text)
{
	char mn[32] = "", mn2[32] = "";

	sscanf(asm_text, "%31s %31s", mn, mn2);
	if (!strcmp(mn, "notrack") || !strcmp(mn, "bnd") ||
	    !strcmp(mn, "cs") || !strcmp(mn, "ds"))
		memmove(mn, mn2, sizeof(mn));
	if (!strcmp(mn, "ljmp") || (mn[0] == 'j' && strchr(asm_text, '*')))
		return 'I';
	if (!strcmp(mn, "jmp"))
		return 'J';
	if (mn[0] == 'j' || !strncmp(mn, "loop", 4))
		return 'C';
	if ((!strcmp(mn, "ret") || !strcmp(mn, "retq")) &&
	    !strchr(asm_text, '$'))
		return 'R';
	return 'o';
}

static void check_function(void)
{
	unsigned long off = 0, i;
	enum kpatch_insn kind;
	unsigned long target;
	unsigned int len;
	char k;

	if (!ninsns)
		return;
	functions++;
	for (i = 0; i < ninsns && off < nbytes; off += lens[i++]) {
		len = kpatch_decode(bytes + off, nbytes - off, 0x1000 + off,
				    &kind, &target);
		insns++;
		if (!len) {
			undecoded++;
			printf("undecoded: %s+%#lx: %02x %02x %02x %02x\n",
			       name, off, bytes[off], bytes[off + 1],
			       bytes[off + 2], bytes[off + 3]);
			return;
		}
		/* objdump shows fwait and the x87 instruction after it as one */
		if (len == 1 && bytes[off] == 0x9b && lens[i] > 1)
			continue;
		k = kind == KPATCH_INSN_JUMP ? 'J' :
		    kind == KPATCH_INSN_JCC ? 'C' :
		    kind == KPATCH_INSN_INDIRECT ? 'I' :
		    kind == KPATCH_INSN_RET ? 'R' : 'o';
		if (len != lens[i] || k != kinds[i]) {
			bad++;
			printf("MISMATCH: %s+%#lx: length %u kind %c, objdump %u %c: %02x %02x %02x %02x\n",
			       name, off, len, k, lens[i], kinds[i], bytes[off],
			       bytes[off + 1], bytes[off + 2], bytes[off + 3]);
			return;
		}
	}
}

int main(void)
{
	static char line[1 << 16];
	char *p, *tab, *end;
	unsigned long v;
	unsigned int n;

	while (fgets(line, sizeof(line), stdin)) {
		/* "ffffffff81000000 <name>:" starts a function */
		p = strchr(line, '<');
		if (p && isxdigit((unsigned char)line[0]) &&
		    strstr(line, ">:\n")) {
			check_function();
			nbytes = ninsns = 0;
			snprintf(name, sizeof(name), "%.*s",
				 (int)(strstr(p, ">:") - p - 1), p + 1);
			continue;
		}
		/* "  addr:\tbytes \tmnemonic operands" */
		p = strchr(line, ':');
		if (!p || p[1] != '\t')
			continue;
		p += 2;
		tab = strchr(p, '\t');
		if (!tab)
			continue;
		if (strstr(tab, "(bad)")) {	/* not code: skip the function */
			nbytes = ninsns = 0;
			continue;
		}
		n = 0;
		for (; p < tab; p = end) {
			while (*p == ' ')
				p++;
			if (p >= tab)
				break;
			v = strtoul(p, &end, 16);
			if (end == p || nbytes >= MAX_BYTES - 16)
				break;
			bytes[nbytes++] = v;
			n++;
		}
		if (!n || ninsns >= MAX_INSNS)
			continue;
		lens[ninsns] = n;
		kinds[ninsns++] = objdump_kind(tab + 1);
	}
	check_function();
	printf("%lu functions, %lu instructions: %lu mismatches, %lu not decoded\n",
	       functions, insns, bad, undecoded);
	return bad ? 1 : 0;
}
