//go:build !amd64 || purego

package aesgcm

const haveAsm = false

func ctrXor(rk *[11 * 16]byte, ctr *[16]byte, dst, src *byte, n int) {
	panic("aesgcm: no wide registers")
}

func ghashBlocks(keys *[16 * 16]byte, y *[16]byte, src *byte, n int) {
	panic("aesgcm: no wide registers")
}
