package benchkit

import (
	"sync"
	"sync/atomic"
)

// Parallel calls work(i) once for every i from 0 to n-1 on workers
// goroutines. Each goroutine gets its work from newWorker, so that it can
// keep scratch space of its own. After each i it calls progress, when not
// nil, with the number done so far, one call at a time. It hands out no
// more work after the first error, which it returns.
func Parallel(workers, n int, newWorker func() func(i int) error, progress func(done int)) error {
	var next, done atomic.Int64
	var failed atomic.Bool
	var firstErr error
	var errOnce sync.Once
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() {
					return
				}
				if err := work(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
				d := done.Add(1)
				if progress != nil {
					mu.Lock()
					progress(int(d))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// SplitMix64 is Steele, Lea and Flood's generator. Its output function is
// a bijection of a state that never repeats within 2^64 steps, so one
// stream yields distinct values.
type SplitMix64 struct{ State uint64 }

// Next is the stream's next value.
func (r *SplitMix64) Next() uint64 {
	r.State += 0x9e3779b97f4a7c15
	z := r.State
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
