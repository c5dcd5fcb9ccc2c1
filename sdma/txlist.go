package sdma

// TxList is a FIFO list of txreqs linked through each txreq's own list link, the Go shape of the
// kernel's struct list_head tx_list: it never allocates. A txreq can be on one list at a time, and
// only while it is not in flight (the engine uses the link while it is). The zero value is an
// empty list. A TxList is not safe for concurrent use.
type TxList struct {
	head, tail *TxReq // written and read by the list's owner only
	n          int
}

// Len returns the number of txreqs on the list.
func (l *TxList) Len() int { return l.n }

// Front returns the first txreq, or nil.
func (l *TxList) Front() *TxReq { return l.head }

// PushBack appends tx (list_add_tail). tx must not be on a list, this one or another: linking it
// again cuts the list it is on (its Len then counts txreqs that no walk reaches, and SendList
// stops at the cut with an error about a nil txreq). A nil tx is a programmer error, and so is tx
// already first or last on l, the double add PushBack can see without a walk (as the kernel's list
// debugging, __list_add_valid, sees a new entry equal to its neighbours): PushBack panics with a
// message saying so, and changes nothing. A txreq left on a list the caller dropped may be pushed
// onto another: a txreq carries no mark of the list it is on.
func (l *TxList) PushBack(tx *TxReq) {
	if tx == nil {
		panic("sdma: TxList.PushBack of a nil txreq")
	}
	if tx == l.tail || tx == l.head {
		panic("sdma: TxList.PushBack of a txreq already on the list (PopFront it first)")
	}
	tx.next = nil
	if l.tail == nil {
		l.head = tx
	} else {
		l.tail.next = tx
	}
	l.tail = tx
	l.n++
}

// pushFront prepends tx (list_add). A nil tx panics, as for PushBack.
func (l *TxList) pushFront(tx *TxReq) {
	if tx == nil {
		panic("sdma: TxList.pushFront of a nil txreq")
	}
	tx.next = l.head
	l.head = tx
	if l.tail == nil {
		l.tail = tx
	}
	l.n++
}

// PopFront removes and returns the first txreq (list_del_init of the head), or nil.
func (l *TxList) PopFront() *TxReq {
	tx := l.head
	if tx == nil {
		return nil
	}
	l.head = tx.next
	if l.head == nil {
		l.tail = nil
	}
	tx.next = nil
	l.n--
	return tx
}

// pushBackList moves every txreq of other to the end of l, leaving other empty (list_splice_tail_init).
func (l *TxList) pushBackList(other *TxList) {
	if other.head == nil {
		return
	}
	if l.tail == nil {
		l.head = other.head
	} else {
		l.tail.next = other.head
	}
	l.tail = other.tail
	l.n += other.n
	*other = TxList{}
}

// Next returns the txreq after tx on its list, or nil (also for a nil tx); for iteration:
//
//	for tx := l.Front(); tx != nil; tx = l.Next(tx) { … }
func (l *TxList) Next(tx *TxReq) *TxReq {
	if tx == nil {
		return nil
	}
	return tx.next
}
