package sqlstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/strata-storage/strata/internal/catalog"
)

// inodeCache holds namespace entries in memory so that stat and lookup
// skip the database. It is exact, not a TTL cache, because every write goes
// through this store's single writer goroutine, which applies each committed
// change to the cache in commit order. A reader that missed fills the cache
// only if no write touched that shard while it read the database; otherwise
// its value may predate the write and is dropped.
//
// This holds as long as one process writes the catalog, which is Strata's
// design (one core per catalog).
//
// Directories are not cached: their times change with every entry added
// or removed below them, and the core resolves paths through a directory
// cache of its own (which holds no times).
//
// The cache holds at most a configured number of entries (SetCacheSize),
// spread over shards. A full shard evicts one entry for each it takes in, a
// random one (Go's map iteration starts at a random place): lookups of a
// cache at its cap keep hitting on everything but the entry just evicted,
// where emptying a whole shard made one lookup in 64 miss at once. Hits
// and misses are counted for /metrics.
type inodeCache struct {
	seed     maphash.Seed
	shardMax atomic.Int64 // entries per shard
	hits     atomic.Int64
	misses   atomic.Int64
	shards   [cacheShards]cacheShard
}

const cacheShards = 64

// DefaultCacheEntries is the inode cache's size unless configured: at the
// ~0.3 KB an entry costs, about 80 MB.
const DefaultCacheEntries = 1 << 18

type dirent struct {
	parent int64
	name   string
}

type cacheShard struct {
	mu    sync.RWMutex
	seq   uint64 // bumped by every write applied to the shard
	names map[dirent]cached
}

// cached is what the cache keeps of an entry: the rest of it is the key
// (parent and name), and Xattrs and Replaced are never part of a read.
// It stays at most 128 bytes, which Go's map holds in place; a
// catalog.Inode (136) became a heap object of its own per entry, and the
// garbage collector marked 2.5 times the objects (8 clients' creates:
// 8 µs of its CPU a create against 3).
type cached struct {
	id, size, mtime, ctime, atime, bitfile int64
	cos, target                            string
	mode, uid, gid                         uint32
	kind                                   catalog.Kind
}

func pack(in catalog.Inode) cached {
	return cached{id: in.ID, size: in.Size, mtime: in.Mtime, ctime: in.Ctime, atime: in.Atime,
		bitfile: in.Bitfile, cos: in.COS, target: in.Target, mode: in.Mode, uid: in.UID, gid: in.GID, kind: in.Kind}
}

func (v cached) inode(k dirent) catalog.Inode {
	return catalog.Inode{ID: v.id, Parent: k.parent, Name: k.name, Kind: v.kind, Mode: v.mode,
		UID: v.uid, GID: v.gid, Size: v.size, Mtime: v.mtime, Ctime: v.ctime, Atime: v.atime,
		COS: v.cos, Bitfile: v.bitfile, Target: v.target}
}

func newInodeCache() *inodeCache {
	c := &inodeCache{seed: maphash.MakeSeed()}
	c.setSize(DefaultCacheEntries)
	for i := range c.shards {
		c.shards[i].names = map[dirent]cached{}
	}
	return c
}

// setSize sets the cap (entries in all); shards already over it shrink as
// entries arrive.
func (c *inodeCache) setSize(entries int) {
	c.shardMax.Store(int64(max(entries/cacheShards, 1)))
}

// stats reports the entries held and the lookups that hit and missed.
func (c *inodeCache) stats() (entries, hits, misses int64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		entries += int64(len(s.names))
		s.mu.RUnlock()
	}
	return entries, c.hits.Load(), c.misses.Load()
}

// put stores in in shard s (locked), evicting an entry or more if the
// shard is at its cap.
func (c *inodeCache) put(s *cacheShard, k dirent, in catalog.Inode) {
	v := pack(in)
	if _, ok := s.names[k]; !ok {
		for n := int64(len(s.names)) - c.shardMax.Load(); n >= 0; n-- {
			for old := range s.names {
				delete(s.names, old)
				break
			}
		}
	}
	s.names[k] = v
}

func (c *inodeCache) shard(parent int64, name string) *cacheShard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var b [8]byte
	for i := range b {
		b[i] = byte(parent >> (8 * i))
	}
	h.Write(b[:])
	h.WriteString(name)
	return &c.shards[h.Sum64()%cacheShards]
}

// get returns the cached entry, or the shard's sequence number to pass to
// fill after reading the database.
func (c *inodeCache) get(parent int64, name string) (catalog.Inode, uint64, bool) {
	s := c.shard(parent, name)
	s.mu.RLock()
	defer s.mu.RUnlock()
	k := dirent{parent, name}
	v, ok := s.names[k]
	if !ok {
		c.misses.Add(1)
		return catalog.Inode{}, s.seq, false
	}
	c.hits.Add(1)
	return v.inode(k), s.seq, true
}

// fill caches what a reader found, unless a write intervened.
func (c *inodeCache) fill(in catalog.Inode, seq uint64) {
	if in.Kind == catalog.KindDir {
		return
	}
	s := c.shard(in.Parent, in.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq != seq {
		return
	}
	c.put(s, dirent{in.Parent, in.Name}, in)
}

// set records a committed entry (writer only).
func (c *inodeCache) set(in catalog.Inode) {
	s := c.shard(in.Parent, in.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if in.Kind == catalog.KindDir {
		delete(s.names, dirent{in.Parent, in.Name})
		return
	}
	c.put(s, dirent{in.Parent, in.Name}, in)
}

// drop forgets an entry (writer only).
func (c *inodeCache) drop(parent int64, name string) {
	s := c.shard(parent, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	delete(s.names, dirent{parent, name})
}

// clear forgets everything (writer only): after removing a whole tree,
// whose entries are not worth finding one by one.
func (c *inodeCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.seq++
		s.names = map[dirent]cached{}
		s.mu.Unlock()
	}
}
