package responses

import (
	"net/http"
	"strconv"

	"github.com/hermod/hermod/libs/openai"
)

// pageQuery is a list request's paging: limit (1 to 100, 20 by
// default), order (asc or desc, desc by default) and after (an item id).
type pageQuery struct {
	limit int
	desc  bool
	after string
}

// readPageQuery reads the paging of a list request; false when it was
// answered (refused).
func readPageQuery(w http.ResponseWriter, r *http.Request) (pageQuery, bool) {
	q := r.URL.Query()
	p := pageQuery{limit: 20, desc: true, after: q.Get("after")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "limit", "limit must be an integer from 1 to 100", 0)
			return p, false
		}
		p.limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		p.desc = false
	default:
		openai.WriteError(w, http.StatusBadRequest, openai.TypeInvalidRequest, "invalid_value", "order", "order must be asc or desc", 0)
		return p, false
	}
	return p, true
}

// of is the page of items (oldest first) the query asks for, as a list
// object.
func (p pageQuery) of(items []InputItem) map[string]any {
	items = append([]InputItem(nil), items...)
	if p.desc {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	if p.after != "" {
		for i, it := range items {
			if it.ID == p.after {
				items = items[i+1:]
				break
			}
		}
	}
	more := len(items) > p.limit
	if more {
		items = items[:p.limit]
	}
	return itemList(items, more)
}

// itemList is the list object of items.
func itemList(items []InputItem, more bool) map[string]any {
	if items == nil {
		items = []InputItem{}
	}
	list := map[string]any{"object": "list", "data": items, "has_more": more, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		list["first_id"], list["last_id"] = items[0].ID, items[len(items)-1].ID
	}
	return list
}
