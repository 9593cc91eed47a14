package bench

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"sync"
)

// names lists worker k's n file names in dir (a shared dir when several
// workers get the same one: names carry the worker).
func names(dir string, k, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/f.%d.%d", dir, k, i)
	}
	return out
}

// mdDirs makes one directory per worker under base (or one shared), and
// returns them.
func (r *Run) mdDirs(base string, workers int, shared bool) ([]string, error) {
	dirs := make([]string, workers)
	for k := range dirs {
		dirs[k] = base
		if !shared {
			dirs[k] = fmt.Sprintf("%s/w%d", base, k)
		}
		if err := r.T.Mkdir(r.ctx, dirs[k]); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// mdPhase runs one metadata operation over each worker's list of paths.
func (r *Run) mdPhase(name string, lists [][]string, op func(w *Worker, p string) error) PhaseSpec {
	return PhaseSpec{Name: name, Workers: len(lists), Work: func(w *Worker) error {
		for _, p := range lists[w.ID] {
			if w.Ctx().Err() != nil {
				return w.Ctx().Err()
			}
			t0 := now()
			if err := op(w, p); err != nil {
				return fmt.Errorf("%s %s: %w", name, p, err)
			}
			w.Op(t0, 0)
		}
		return nil
	}}
}

func (r *Run) touchOp(data []byte) func(w *Worker, p string) error {
	return func(w *Worker, p string) error { return r.T.Touch(w.Ctx(), p, data) }
}

func (r *Run) statOp(w *Worker, p string) error   { return r.T.Stat(w.Ctx(), p) }
func (r *Run) removeOp(w *Worker, p string) error { return r.T.Remove(w.Ctx(), p) }

// fileLists gives each worker its file names in its directory.
func fileLists(dirs []string, n int) [][]string {
	lists := make([][]string, len(dirs))
	for k, d := range dirs {
		lists[k] = names(d, k, n)
	}
	return lists
}

// shuffled deals all paths out to workers in a random order (mdtest -R).
func shuffled(lists [][]string, workers int, seed uint64) [][]string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	out := make([][]string, workers)
	for i, p := range all {
		out[i%workers] = append(out[i%workers], p)
	}
	return out
}

// makeTree builds a directory tree of the given depth and fan-out with
// files in every directory, using the run's workers (untimed setup, but
// measured: it is a create benchmark of its own).
func (r *Run) makeTree(root string, depth, fan, perDir int) (Phase, int) {
	var dirs []string
	var walk func(d string, level int)
	walk = func(d string, level int) {
		dirs = append(dirs, d)
		if level == depth {
			return
		}
		for i := range fan {
			walk(fmt.Sprintf("%s/d%d", d, i), level+1)
		}
	}
	walk(root, 0)
	for _, d := range dirs { // parents first
		if err := r.T.Mkdir(r.ctx, d); err != nil {
			return Phase{Name: "build tree", Error: err.Error()}, 0
		}
	}
	lists := make([][]string, r.Workers)
	for i, d := range dirs {
		for j := range perDir {
			lists[i%r.Workers] = append(lists[i%r.Workers], fmt.Sprintf("%s/f%d", d, j))
		}
	}
	ph := r.runPhase(r.mdPhase("build tree (create)", lists, r.touchOp(nil)))
	ph.Durability = r.info.MetaDurability
	return ph, len(dirs) * (perDir + 1)
}

// walkTree reads every directory of the tree under root and stats every
// entry, with workers sharing a queue of directories (pfind's way; one
// worker is the serial walk of scenario 9). Over several processes each
// takes every parts-th subdirectory of the root and walks it with its
// workers' queue; the first process also counts the root.
func (r *Run) walkTree(name, root string, workers int) Phase {
	part, parts := r.share(workers)
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	queue := []string{root}
	busy := 0
	return r.runPhase(PhaseSpec{Name: name, Workers: workers, Work: func(w *Worker) error {
		for {
			mu.Lock()
			for len(queue) == 0 && busy > 0 && w.Ctx().Err() == nil {
				cond.Wait()
			}
			if len(queue) == 0 || w.Ctx().Err() != nil {
				mu.Unlock()
				cond.Broadcast()
				return w.Ctx().Err()
			}
			d := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			busy++
			mu.Unlock()
			// done hands back the directory, with what it found below.
			done := func(sub []string) {
				mu.Lock()
				queue = append(queue, sub...)
				busy--
				mu.Unlock()
				cond.Broadcast()
			}

			t0 := now()
			es, err := r.T.ReadDir(w.Ctx(), d)
			if err != nil {
				done(nil)
				return fmt.Errorf("readdir %s: %w", d, err)
			}
			split := d == root && parts > 1
			if !split || part == 0 {
				w.Op(t0, 0)
			}
			if split {
				sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
			}
			var sub []string
			for i, e := range es {
				if split && (e.IsDir && i%parts != part || !e.IsDir && part != 0) {
					continue // another process's
				}
				p := path.Join(d, e.Name)
				t0 := now()
				if err := r.T.Stat(w.Ctx(), p); err != nil {
					done(nil)
					return fmt.Errorf("stat %s: %w", p, err)
				}
				w.Op(t0, 0)
				if e.IsDir {
					sub = append(sub, p)
				}
			}
			done(sub)
		}
	}})
}
