package alloc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gosdma/gosdma/alloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewListBadSize(t *testing.T) {
	big := uint64(1) << 32 // a variable: on 32-bit platforms int(big) is 0, also refused
	for _, n := range []int{0, -1, int(big)} {
		_, err := alloc.NewList[obj](n, nil)
		assert.Error(t, err, "n=%d", n)
	}
}

func TestListExhaustion(t *testing.T) {
	l, err := alloc.NewList[obj](4, nil)
	require.NoError(t, err)
	assert.Equal(t, 4, l.Len())
	var held []*obj
	for range 4 {
		o, err := l.Get()
		require.NoError(t, err)
		held = append(held, o)
	}
	st := l.Stats()
	assert.Equal(t, alloc.Stats{InUse: 4, HighWater: 4, Objects: 4, Slabs: 1}, st)

	_, err = l.Get()
	require.ErrorIs(t, err, alloc.ErrEmpty)
	// The empty path never allocates, and returns the bare sentinel.
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if _, err := l.Get(); err != alloc.ErrEmpty {
			panic(err)
		}
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = l.GetCtx(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, l.Put(held[2]))
	o, err := l.Get()
	require.NoError(t, err)
	assert.Same(t, held[2], o, "LIFO: the object just put back comes out first")
	for _, o := range held {
		require.NoError(t, l.Put(o))
	}
	assert.Equal(t, alloc.Stats{InUse: 0, HighWater: 4, Objects: 4, Slabs: 1}, l.Stats())
}

func TestListGetCtxWokenByPut(t *testing.T) {
	l, err := alloc.NewList[obj](1, resetObj)
	require.NoError(t, err)
	o, err := l.Get()
	require.NoError(t, err)
	o.val = 42
	got := make(chan *obj)
	go func() {
		p, err := l.GetCtx(context.Background())
		assert.NoError(t, err)
		got <- p
	}()
	time.Sleep(10 * time.Millisecond) // let it park (the test passes either way)
	require.NoError(t, l.Put(o))
	p := <-got
	assert.Same(t, o, p)
	assert.Zero(t, p.val, "reset ran before the hand-off")
}

func TestListCloseWakesWaiters(t *testing.T) {
	l, err := alloc.NewList[obj](1, nil)
	require.NoError(t, err)
	o, err := l.Get()
	require.NoError(t, err)
	const waiters = 3
	errs := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := l.GetCtx(context.Background())
			errs <- err
		}()
	}
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, l.Close())
	for range waiters {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, alloc.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not woken by Close")
		}
	}
	_, err = l.Get()
	assert.ErrorIs(t, err, alloc.ErrClosed)
	_, err = l.GetCtx(context.Background())
	assert.ErrorIs(t, err, alloc.ErrClosed)
	assert.NoError(t, l.Put(o), "objects in use may still be put back")
	assert.NoError(t, l.Close(), "Close is idempotent")
}

// TestListGetCtxStress: many more goroutines than objects, all waiting with GetCtx, some with
// deadlines that expire. Every object is held by one goroutine at a time, and nobody waits forever
// while objects are free (a lost wakeup would hang until the overall deadline).
func TestListGetCtxStress(t *testing.T) {
	workers, rounds := 16, 400
	if testing.Short() {
		rounds = 80
	}
	l, err := alloc.NewList(3, resetObj)
	require.NoError(t, err)
	overall, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var got, timedOut atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func(id int64) {
			defer wg.Done()
			for r := range rounds {
				ctx := overall
				var c context.CancelFunc = func() {}
				if (int(id)+r)%5 == 0 {
					ctx, c = context.WithTimeout(overall, time.Duration(r%3)*time.Microsecond)
				}
				o, err := l.GetCtx(ctx)
				c()
				if err != nil {
					if overall.Err() != nil {
						t.Errorf("worker %d starved: %v", id, err)
						return
					}
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("worker %d: %v", id, err)
						return
					}
					timedOut.Add(1)
					continue
				}
				if !o.owner.CompareAndSwap(0, id) {
					t.Errorf("worker %d got an object owned by %d", id, o.owner.Load())
					return
				}
				if o.val != 0 {
					t.Errorf("dirty object")
				}
				o.val = int(id)
				got.Add(1)
				if r%7 == 0 {
					time.Sleep(time.Microsecond)
				}
				o.owner.Store(0)
				if err := l.Put(o); err != nil {
					t.Error(err)
					return
				}
			}
		}(int64(w + 1))
	}
	wg.Wait()
	assert.Positive(t, got.Load())
	assert.Zero(t, l.Stats().InUse)
	t.Logf("%d gets, %d timed out", got.Load(), timedOut.Load())
}

// TestListGetCtxCancelRace: waiters cancelled while Puts hand objects over must neither lose an
// object nor get one twice.
func TestListGetCtxCancelRace(t *testing.T) {
	rounds := 300
	if testing.Short() {
		rounds = 60
	}
	l, err := alloc.NewList[obj](2, nil)
	require.NoError(t, err)
	for range rounds {
		a, _ := l.Get()
		b, _ := l.Get()
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan *obj, 2)
		for range 2 {
			go func() {
				o, _ := l.GetCtx(ctx)
				res <- o
			}()
		}
		go cancel()
		require.NoError(t, l.Put(a))
		require.NoError(t, l.Put(b))
		for range 2 {
			if o := <-res; o != nil {
				require.NoError(t, l.Put(o))
			}
		}
		// Both objects must be free again.
		x, err1 := l.Get()
		y, err2 := l.Get()
		require.NoError(t, err1)
		require.NoError(t, err2)
		require.NotSame(t, x, y)
		require.NoError(t, l.Put(x))
		require.NoError(t, l.Put(y))
		cancel()
	}
}
