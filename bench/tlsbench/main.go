// Command tlsbench is the baseline for Strata's TLS figures: what
// crypto/tls alone moves between two processes on this machine, with the
// same cipher suite negotiation (TLS 1.3), the same parallelism and the
// same 1 MiB writes as a striped put, and the same over plain TCP.
//
//	tlsbench recv -addr 127.0.0.1:7460 [-tls]          # accepts and discards
//	tlsbench send -addr 127.0.0.1:7460 [-tls] -bytes N -streams 4
//	tlsbench aead -bytes N
//
// send prints the rate in MB/s (10^6 bytes) once every stream's bytes are
// acknowledged by the receiver. aead prints the core-seconds AES-128-GCM
// (the suite crypto/tls negotiates between two hosts with AES hardware)
// takes to seal N bytes and to open them again, one goroutine: in full TLS
// records with crypto/cipher, as crypto/tls does, and in the data
// channel's frames with its cipher (internal/aesgcm). The channel's is the
// least CPU a transfer of N bytes over Strata's encrypted data path costs
// its two ends together, whatever else it does.
package main

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/strata-storage/strata/internal/aesgcm"
	"github.com/strata-storage/strata/internal/pki"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tlsbench recv|send [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:7460", "address")
	useTLS := fs.Bool("tls", false, "TLS 1.3 instead of plain TCP")
	n := fs.Int64("bytes", 4<<30, "send: bytes in all")
	streams := fs.Int("streams", 4, "send: parallel connections")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "recv":
		recv(*addr, *useTLS)
	case "send":
		send(*addr, *useTLS, *n, *streams)
	case "aead":
		aead(*n)
	default:
		fmt.Fprintln(os.Stderr, "usage: tlsbench recv|send [flags]")
		os.Exit(2)
	}
}

func selfSigned() tls.Certificate {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tlsbench"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// recv reads an 8-byte length, then that many bytes, then answers one
// byte: the sender's clock stops when the data has arrived.
func recv(addr string, useTLS bool) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if useTLS {
		ln = tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{selfSigned()}})
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			var h [8]byte
			if _, err := io.ReadFull(c, h[:]); err != nil {
				return
			}
			buf := make([]byte, 1<<20)
			if _, err := io.CopyBuffer(io.Discard, io.LimitReader(c, int64(binary.BigEndian.Uint64(h[:]))), buf); err == nil {
				c.Write([]byte{1})
			}
		}()
	}
}

func send(addr string, useTLS bool, n int64, streams int) {
	per := n / int64(streams)
	conns := make([]net.Conn, streams)
	for i := range conns {
		var c net.Conn
		var err error
		if useTLS {
			c, err = tls.Dial("tcp", addr, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true})
		} else {
			c, err = net.Dial("tcp", addr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conns[i] = c
	}
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h [8]byte
			binary.BigEndian.PutUint64(h[:], uint64(per))
			c.Write(h[:])
			for left := per; left > 0; left -= int64(len(buf)) {
				if _, err := c.Write(buf[:min(left, int64(len(buf)))]); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
			}
			c.Read(h[:1])
			c.Close()
		}()
	}
	wg.Wait()
	fmt.Printf("%.0f\n", float64(per*int64(streams))/1e6/time.Since(t0).Seconds())
}

// aead times, by the process's CPU clock, sealing n bytes and opening
// them again twice: as crypto/tls does (crypto/cipher's AES-128-GCM, 16 KiB
// records, in place) and as the data channel does (internal/aesgcm,
// frames of pki.MaxFrame).
func aead(n int64) {
	key := make([]byte, 16)
	rand.Read(key)
	block, _ := aes.NewCipher(key)
	std, _ := cipher.NewGCM(block)
	seal, open := sealOpen(std, 16<<10, n)
	ch, _ := aesgcm.New(key)
	cseal, copen := sealOpen(ch, pki.MaxFrame, n)
	fmt.Printf("{\"seal_s\": %.3f, \"open_s\": %.3f, \"channel_seal_s\": %.3f, \"channel_open_s\": %.3f}\n", seal, open, cseal, copen)
}

// sealOpen seals n bytes in records of the given size and opens as many,
// returning the CPU seconds of each.
func sealOpen(g cipher.AEAD, record int, n int64) (seal, open float64) {
	const ring = 64
	size := record + g.Overhead()
	buf := make([]byte, ring*size)
	rand.Read(buf)
	nonce := make([]byte, g.NonceSize())
	recs := max(n/int64(record), ring)
	seal = cpuTime(func() {
		for i := int64(0); i < recs; i++ {
			binary.BigEndian.PutUint64(nonce[4:], uint64(i))
			p := buf[(i%ring)*int64(size):][:record]
			g.Seal(p[:0], nonce, p, nil)
		}
	})
	// The last ring of records sealed, each opened in turn into a
	// scratch record (in place would spoil it for the next turn).
	scratch := make([]byte, record)
	open = cpuTime(func() {
		for i := int64(0); i < recs; i++ {
			k := recs - ring + i%ring
			binary.BigEndian.PutUint64(nonce[4:], uint64(k))
			if _, err := g.Open(scratch[:0], nonce, buf[(k%ring)*int64(size):][:size], nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	})
	return seal, open
}

// cpuTime is the CPU time (user + system) the process spends in f.
func cpuTime(f func()) float64 {
	var a, b syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &a)
	f()
	syscall.Getrusage(syscall.RUSAGE_SELF, &b)
	t := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
	}
	return t(b) - t(a)
}
