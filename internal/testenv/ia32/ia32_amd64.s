#include "textflag.h"

// func Syscall(nr, a1, a2, a3, a4, a5 uint32) int32
TEXT ·Syscall(SB), NOSPLIT, $0-28
	MOVL nr+0(FP), AX
	MOVL a1+4(FP), BX
	MOVL a2+8(FP), CX
	MOVL a3+12(FP), DX
	MOVL a4+16(FP), SI
	MOVL a5+20(FP), DI
	INT $0x80
	MOVL AX, ret+24(FP)
	RET
