package ring

import (
	"testing"

	"github.com/gosdma/gosdma/desc"
	"github.com/stretchr/testify/require"
)

// opsModel is the plain model FuzzRingOps checks the ring against: four indices and, per index
// in [sw, res), the descriptor the ring must hold there (stamped by the model's own rule).
type opsModel struct {
	size              uint64
	res, tail, hw, sw uint64
	pending           []*Reservation // reserved, unpublished, in order
	published         *Reservation   // the last reservation published, or nil
	content           map[uint64]desc.Desc
}

func (m *opsModel) write(start uint64, ds []desc.Desc, skip int) {
	for k, d := range ds {
		i := start + uint64(k)
		if k == 0 || k > skip {
			d.Qw1 = d.Qw1&^(3<<2) | (i/m.size%4)<<2
		}
		m.content[i] = d
	}
}

// FuzzRingOps drives one ring from a single goroutine with a random sequence of operations, good
// and bad: reservations (too big, full), Writes inside and outside a reservation, Publishes of
// reservations and again of published ones, Dequeues, and hardware-model and completion steps in and out
// of order. After every operation the ring's indices, free count and published contents must
// match the model; every refused call must be refused with the right sentinel and change nothing.
func FuzzRingOps(f *testing.F) {
	f.Add(uint64(0), uint8(0), []byte{0, 5, 1, 0, 2, 0, 5, 9})
	f.Add(^uint64(0)-70, uint8(1), []byte{0, 40, 0, 30, 1, 1, 2, 0, 3, 200, 4, 7, 2, 0, 6, 3, 7, 2, 5, 60})
	f.Add(uint64(1)<<32-64, uint8(2), []byte{0, 63, 0, 1, 1, 0, 2, 0, 6, 63, 7, 63, 0, 62, 4, 1, 3, 3, 5, 63})
	f.Fuzz(func(t *testing.T, start uint64, impl uint8, prog []byte) {
		names := Implementations()
		restore, err := setImplementation(names[int(impl)%len(names)])
		require.NoError(t, err)
		defer restore()
		const size = 64
		r, err := newAt(size, start)
		require.NoError(t, err)
		m := &opsModel{size: size, res: start, tail: start, hw: start, sw: start, content: map[uint64]desc.Desc{}}
		val := uint64(0)
		mkBatch := func(n int) []desc.Desc {
			ds := make([]desc.Desc, n)
			for k := range ds {
				val++
				ds[k] = desc.Desc{Qw0: val, Qw1: val*0x9e3779b97f4a7c15 | 3<<2}
			}
			return ds
		}
		dst := make([]desc.Desc, 80)

		for pc := 0; pc+1 < len(prog); pc += 2 {
			op, arg := prog[pc]%8, prog[pc+1]
			switch op {
			case 0: // Reserve
				n := 1 + int(arg)%70
				s, err := r.Reserve(n)
				switch {
				case n > size-1:
					require.ErrorIs(t, err, ErrTooBig)
				case uint64(n) > size-1-(m.res-m.sw):
					require.Same(t, ErrFull, err)
				default:
					require.NoError(t, err)
					require.Equal(t, m.res, s.Start())
					require.Equal(t, n, s.Len())
					m.pending = append(m.pending, &s)
					m.res += uint64(n)
				}
			case 1, 2: // write (1) or write and publish (2) the oldest pending reservation
				if len(m.pending) == 0 {
					continue
				}
				p := m.pending[0]
				require.Equal(t, m.tail, p.Start(), "the oldest reservation starts at the tail")
				ds := mkBatch(p.Len())
				skip := int(arg) % 3
				p.Write(0, ds, skip)
				m.write(p.Start(), ds, min(skip, len(ds)-1))
				if op == 2 {
					p.Publish()
					m.tail = p.Start() + uint64(p.Len())
					m.pending = m.pending[1:]
					m.published = p
				}
			case 3: // Publish again of a published reservation, or of the zero one: panics
				p := m.published
				if p == nil || arg%4 == 0 {
					p = &Reservation{}
				}
				requirePanicIs(t, ErrNotReserved, func() { p.Publish() })
			case 4: // Write of an arbitrary range of a reservation: panics unless inside an unpublished one
				off := int(arg%80) - 8
				n := int(arg/80) * 3
				ds := mkBatch(n)
				var p *Reservation
				if len(m.pending) > 0 && arg%3 != 0 {
					p = m.pending[len(m.pending)-1]
				} else if m.published != nil {
					p = m.published
				} else {
					continue
				}
				switch {
				case n == 0:
					requirePanicIs(t, ErrSize, func() { p.Write(off, ds, 0) })
				case p != m.published && off >= 0 && off+n <= p.Len():
					p.Write(off, ds, 0)
					m.write(p.Start()+uint64(off), ds, 0)
				default:
					requirePanicIs(t, ErrNotReserved, func() { p.Write(off, ds, 0) })
				}
			case 5: // Dequeue
				want := min(int(arg)%80, int(m.tail-m.hw))
				got := r.Dequeue(dst[:int(arg)%80])
				require.Equal(t, want, got)
				for k := range got {
					require.Equal(t, m.content[m.hw+uint64(k)], dst[k], "index %#x", m.hw+uint64(k))
				}
				if got > 0 {
					m.hw += uint64(got)
					m.sw = m.hw
				}
			case 6: // SetHWHead, in or out of [hw, tail]
				h := m.hw + uint64(int(arg%72)-4)
				if h-m.hw <= m.tail-m.hw {
					for i := m.hw; i != h; i++ {
						require.Equal(t, m.content[i], r.Slot(i), "index %#x", i)
					}
					r.SetHWHead(h)
					m.hw = h
				} else {
					requirePanicIs(t, ErrOrder, func() { r.SetHWHead(h) })
				}
			case 7: // completion pass, in or out of [sw, hw]
				h := m.sw + uint64(int(arg%72)-4)
				seq := r.HeadSeq()
				if h-m.sw <= m.hw-m.sw {
					r.BeginWrite()
					r.SetSwHead(h)
					r.EndWrite()
					require.True(t, r.HeadRetry(seq))
					for i := m.sw; i != h; i++ {
						delete(m.content, i)
					}
					m.sw = h
				} else {
					requirePanicIs(t, ErrOrder, func() { r.SetSwHead(h) })
					require.False(t, r.HeadRetry(seq))
				}
			}
			require.Equal(t, m.tail, r.Tail(), "op %d tail", op)
			require.Equal(t, m.hw, r.HWHead(), "op %d hwHead", op)
			require.Equal(t, m.sw, r.SwHead(), "op %d swHead", op)
			require.Equal(t, int(size-1-(m.res-m.sw)), r.FreeCnt(), "op %d free", op)
			require.Equal(t, int(m.res-m.sw), r.Used())
			require.Equal(t, int(m.res-m.sw)+1, r.InProcess(), "op %d: InProcess is one more than in use (the kernel's)", op)
			require.Equal(t, m.res, r.Reserved(), "op %d reserved", op)
			require.Equal(t, m.res == m.sw, r.Empty())
			require.Zero(t, r.Seq().Count()%2, "no write section left open")
		}
		// Drain: publish what is pending, and everything published comes out as the model says.
		for _, p := range m.pending {
			ds := mkBatch(p.Len())
			p.Write(0, ds, 0)
			m.write(p.Start(), ds, 0)
			p.Publish()
			m.tail = p.Start() + uint64(p.Len())
		}
		for m.hw != m.tail {
			got := r.Dequeue(dst[:63])
			require.Positive(t, got)
			for k := range got {
				require.Equal(t, m.content[m.hw+uint64(k)], dst[k])
			}
			m.hw += uint64(got)
		}
		r.BeginWrite()
		r.SetSwHead(r.HWHead()) // what a SetHWHead left uncompleted
		r.EndWrite()
		require.True(t, r.Empty())
		require.Equal(t, size-1, r.FreeCnt())
	})
}
