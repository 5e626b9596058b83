package openai

import (
	pickerv1 "github.com/hermod/hermod/libs/api/hermod/picker/v1"
)

// PickAPI is the API's value in a PickRequest.
func (a API) PickAPI() pickerv1.Api {
	switch a {
	case APICompletions:
		return pickerv1.Api_API_COMPLETIONS
	case APIChatCompletions:
		return pickerv1.Api_API_CHAT_COMPLETIONS
	case APIMessages:
		return pickerv1.Api_API_MESSAGES
	case APIMessagesCountTokens:
		return pickerv1.Api_API_MESSAGES_COUNT_TOKENS
	case APIGenerate:
		return pickerv1.Api_API_GENERATE
	case APIPassthrough:
		return pickerv1.Api_API_PASSTHROUGH
	}
	return pickerv1.Api_API_UNSPECIFIED
}

// APIOfPick is the API of a PickRequest's value; ok is false for an
// unknown one.
func APIOfPick(a pickerv1.Api) (API, bool) {
	switch a {
	case pickerv1.Api_API_COMPLETIONS:
		return APICompletions, true
	case pickerv1.Api_API_CHAT_COMPLETIONS:
		return APIChatCompletions, true
	case pickerv1.Api_API_MESSAGES:
		return APIMessages, true
	case pickerv1.Api_API_MESSAGES_COUNT_TOKENS:
		return APIMessagesCountTokens, true
	case pickerv1.Api_API_GENERATE:
		return APIGenerate, true
	case pickerv1.Api_API_PASSTHROUGH:
		return APIPassthrough, true
	}
	return 0, false
}

var mediaKinds = [...]struct {
	kind  MediaKind
	proto pickerv1.Media
}{{MediaImage, pickerv1.Media_MEDIA_IMAGE}, {MediaAudio, pickerv1.Media_MEDIA_AUDIO}, {MediaVideo, pickerv1.Media_MEDIA_VIDEO}}

// Proto returns what routing reads of the request, for a PickRequest
// (strings are shared, not copied).
func (r *Request) Proto() *pickerv1.ParsedRequest {
	p := &pickerv1.ParsedRequest{
		Model: r.Model, Stream: r.Stream, MaxTokens: int32(r.MaxTokens), Prompt: r.Prompt, TokenIds: r.TokenIDs,
	}
	if len(r.Messages) > 0 {
		msgs := make([]pickerv1.ChatMessage, len(r.Messages))
		p.Messages = make([]*pickerv1.ChatMessage, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i].Role, msgs[i].Content = m.Role, m.Content
			for _, k := range mediaKinds {
				if m.Media&k.kind != 0 {
					msgs[i].Media = append(msgs[i].Media, k.proto)
				}
			}
			if len(m.Items) > 0 {
				items := make([]pickerv1.MediaItem, len(m.Items))
				msgs[i].Items = make([]*pickerv1.MediaItem, len(m.Items))
				for j, it := range m.Items {
					items[j] = pickerv1.MediaItem{Kind: mediaProto(it.Kind), Hash: it.Hash}
					msgs[i].Items[j] = &items[j]
				}
			}
			p.Messages[i] = &msgs[i]
		}
	}
	return p
}

// FromProto returns the Request a PickRequest carries parsed, sent to api.
func FromProto(api API, p *pickerv1.ParsedRequest) Request {
	r := Request{
		API: api, Model: p.GetModel(), Stream: p.GetStream(), MaxTokens: max(int(p.GetMaxTokens()), 0),
		Prompt: p.GetPrompt(), TokenIDs: p.GetTokenIds(),
	}
	if api.Chat() {
		r.Messages = make([]Message, len(p.GetMessages()))
		for i, m := range p.GetMessages() {
			r.Messages[i] = Message{Role: m.GetRole(), Content: m.GetContent()}
			for _, media := range m.GetMedia() {
				r.Messages[i].Media |= mediaKind(media)
			}
			for _, it := range m.GetItems() {
				if len(r.Messages[i].Items) == MaxMediaItems {
					break
				}
				if kind := mediaKind(it.GetKind()); kind != 0 {
					r.Messages[i].Items = append(r.Messages[i].Items, MediaItem{Kind: kind, Hash: it.GetHash()})
				}
			}
		}
	}
	return r
}

// mediaProto is a media kind's enum value (MEDIA_UNSPECIFIED for none or
// several).
func mediaProto(kind MediaKind) pickerv1.Media {
	for _, k := range mediaKinds {
		if kind == k.kind {
			return k.proto
		}
	}
	return pickerv1.Media_MEDIA_UNSPECIFIED
}

// mediaKind is the media kind of an enum value (0 for an unknown one).
func mediaKind(m pickerv1.Media) MediaKind {
	for _, k := range mediaKinds {
		if m == k.proto {
			return k.kind
		}
	}
	return 0
}
