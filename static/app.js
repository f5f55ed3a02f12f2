// Sugo's few lines of browser code: streaming replies, the composer, panels, shortcuts, theme.
// Everything else is server-rendered HTML with HTMX.
(function () {
  "use strict";

  const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content || "";

  function toast(message, kind) {
    const box = document.getElementById("toasts");
    if (!box) return;
    const el = document.createElement("div");
    el.className = "toast toast-" + (kind || "info");
    el.setAttribute("role", "status");
    el.textContent = message;
    box.appendChild(el);
    setTimeout(() => el.remove(), kind === "error" ? 9000 : 4000);
  }

  // Toasts rendered by the server (errors from HTMX requests) fade out on their own.
  document.addEventListener("htmx:afterSwap", (e) => {
    document.querySelectorAll("#toasts [data-autohide]").forEach((el) => {
      el.removeAttribute("data-autohide");
      setTimeout(() => el.remove(), 9000);
    });
    const focus = e.detail.target.querySelector("[data-autofocus]");
    if (focus) { focus.focus(); focus.setSelectionRange?.(focus.value.length, focus.value.length); }
  });
  document.addEventListener("htmx:sendError", () => toast("Sugo's server did not answer. Is it still running?", "error"));

  // ---- theme --------------------------------------------------------------------------------
  document.addEventListener("click", (e) => {
    if (!e.target.closest('[data-action="toggle-theme"]')) return;
    const root = document.documentElement;
    root.dataset.theme = root.dataset.theme === "light" ? "dark" : "light";
    localStorage.setItem("sugo-theme", root.dataset.theme);
  });

  // ---- panels and dialogs -------------------------------------------------------------------
  function openPanel(id) {
    const panel = document.getElementById(id);
    if (!panel) return;
    // The panel's content is fetched anew on every open: until it arrives, show that it is loading
    // rather than the old form, whose edits the fresh one would silently replace.
    const body = panel.querySelector("#panel-body");
    if (body) body.innerHTML = '<p class="muted small" role="status">Loading…</p>';
    panel.hidden = false;
    document.getElementById("scrim")?.removeAttribute("hidden");
    requestAnimationFrame(() => panel.classList.add("open"));
  }
  function closePanels() {
    document.querySelectorAll(".panel.open").forEach((p) => { p.classList.remove("open"); p.hidden = true; });
    document.getElementById("scrim")?.setAttribute("hidden", "");
  }
  document.addEventListener("click", (e) => {
    const opener = e.target.closest("[data-open-panel]");
    if (opener) openPanel(opener.dataset.openPanel);
    const dlg = e.target.closest("[data-open-dialog]");
    if (dlg) document.getElementById(dlg.dataset.openDialog)?.showModal();
    if (e.target.closest("[data-close-panel]") || e.target.id === "scrim") closePanels();
    if (e.target.closest("[data-close-dialog]")) e.target.closest("dialog")?.close();
  });
  document.addEventListener("sugo:settings-saved", () => {
    const chat = document.getElementById("chat");
    if (chat) refreshHeaderName();
  });
  function refreshHeaderName() {
    const input = document.querySelector('#chat-settings-form input[name="name"]');
    const title = document.getElementById("chat-name");
    if (input && title) title.textContent = input.value;
  }

  // ---- the chat -----------------------------------------------------------------------------
  const chatEl = () => document.getElementById("chat");
  const chatId = () => chatEl()?.dataset.chatId;
  const list = () => document.getElementById("message-list");
  let streaming = null; // {controller, messageId}

  // `instant` on opening a chat: the list scrolls smoothly (for new messages), which from the top
  // of a long chat would take a second or more to reach the end.
  function scrollToEnd(force, instant) {
    const l = list();
    if (!l) return;
    const nearEnd = l.scrollHeight - l.scrollTop - l.clientHeight < 160;
    if (force || nearEnd) l.scrollTo({ top: l.scrollHeight, behavior: instant ? "instant" : "auto" });
  }

  function lastMessageId() {
    const items = list()?.querySelectorAll("article.msg");
    return items && items.length ? Number(items[items.length - 1].dataset.id) : 0;
  }

  // The server renders messages and htmx swaps them. "settle:0ms" puts the final attributes on at
  // once, so a class added right after (is-streaming) is not undone by htmx's settling.
  async function appendNewMessages(afterId) {
    // The answer also re-renders, out of band, the message that was last (it loses its "new
    // version" arrow) and drops the empty-chat note.
    await htmx.ajax("GET", `/chats/${chatId()}/messages?after=${afterId}`, { target: "#message-list", swap: "beforeend settle:0ms" });
    scrollToEnd(true);
  }

  function refreshMessage(id) {
    // Without its target htmx.ajax would swap into the page itself: a message gone is left alone.
    if (!document.getElementById("msg-" + id)) return Promise.resolve();
    return htmx.ajax("GET", `/chats/${chatId()}/messages/${id}`, { target: "#msg-" + id, swap: "outerHTML settle:0ms" }).catch(() => {});
  }

  function setBusy(busy) {
    const send = document.getElementById("send-button");
    const stop = document.getElementById("stop-button");
    if (send) send.hidden = busy;
    if (stop) stop.hidden = !busy;
    chatEl()?.classList.toggle("is-generating", busy);
  }

  async function readStream(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message", data = "";
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (data) await onEvent(event, JSON.parse(data));
      }
    }
  }

  async function consume(response, beforeId) {
    let textEl = null, text = "", messageId = null;
    await readStream(response, async (event, data) => {
      if (event === "start") {
        messageId = data.message_id;
        if (streaming) streaming.messageId = messageId;
        // A new reply is new to the page; a regenerated one, or one followed after a reload, is there.
        if (document.getElementById("msg-" + messageId)) await refreshMessage(messageId);
        else await appendNewMessages(beforeId);
        const item = document.getElementById("msg-" + messageId);
        item?.classList.add("is-streaming");
        textEl = item?.querySelector(".msg-text");
        if (textEl) textEl.innerHTML = '<span class="typing" aria-label="Writing"><i></i><i></i><i></i></span>';
      } else if (event === "token") {
        text += data.text;
        // Plain text while streaming; the server's sanitized Markdown replaces it at the end.
        if (textEl) { textEl.textContent = text; scrollToEnd(false); }
      } else if (event === "error") {
        toast(data.message, "error");
      }
      if (["done", "error", "stopped"].includes(event) && (data.message_id || messageId)) {
        await refreshMessage(data.message_id || messageId);
        scrollToEnd(false);
      }
    });
  }

  async function generate(payload) {
    if (streaming) { toast("A reply is already being written. Stop it first.", "error"); return false; }
    const controller = new AbortController();
    streaming = { controller, messageId: null };
    setBusy(true);
    const beforeId = lastMessageId();
    try {
      const r = await fetch(`/api/chats/${chatId()}/generate`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
        body: JSON.stringify(payload),
        signal: controller.signal,
      });
      if (!r.ok) {
        let msg = "The reply could not start (HTTP " + r.status + ").";
        try { const j = await r.json(); msg = typeof j.detail === "string" ? j.detail : JSON.stringify(j.detail); } catch (_) {}
        toast(msg, "error");
        await appendNewMessages(beforeId).catch(() => {});
        return false;
      }
      await consume(r, beforeId);
      return true;
    } catch (err) {
      if (err.name !== "AbortError") toast("Lost the connection to Sugo while the reply was streaming; reload to see it.", "error");
      return false;
    } finally {
      streaming = null;
      setBusy(false);
    }
  }

  async function follow() {
    // A reply was being written when the page loaded (e.g. after a reload): watch it finish.
    const r = await fetch(`/api/chats/${chatId()}/generate`);
    if (r.status !== 200) return;
    streaming = { controller: new AbortController(), messageId: null };
    setBusy(true);
    try { await consume(r, lastMessageId() - 1); } finally { streaming = null; setBusy(false); }
  }

  async function stop() {
    if (!chatId()) return;
    await fetch(`/api/chats/${chatId()}/stop`, { method: "POST", headers: { "X-CSRF-Token": csrf() } });
  }

  document.addEventListener("submit", async (e) => {
    if (e.target.id !== "composer") return;
    e.preventDefault();
    const input = document.getElementById("composer-input");
    const content = input.value;
    if (content.trim().toLowerCase() === "/refresh") {
      input.value = "";
      // An error answer lands in the toasts (the server retargets it there).
      await htmx.ajax("POST", `/chats/${chatId()}/refresh`, { target: "#message-list", swap: "beforeend" });
      scrollToEnd(true);
      return;
    }
    const speaker = document.getElementById("speaker-select")?.value;
    const payload = { action: "send", content: content.trim() ? content : null };
    if (speaker) payload.speaker_id = Number(speaker);
    input.value = "";
    autosize(input);
    const ok = await generate(payload);
    if (!ok && content && !document.querySelector(".msg-user:last-of-type")) input.value = content;
  });

  document.addEventListener("click", (e) => {
    if (e.target.closest("#stop-button")) stop();
    const regen = e.target.closest('[data-action="regenerate"]');
    if (regen) generate({ action: "regenerate", message_id: Number(regen.dataset.messageId) });
    const more = e.target.closest('[data-action="swipe-new"]');
    if (more) generate({ action: "swipe", message_id: Number(more.dataset.messageId) });
  });


  function autosize(el) {
    el.style.height = "auto";
    el.style.height = Math.min(el.scrollHeight, window.innerHeight * 0.4) + "px";
  }
  document.addEventListener("input", (e) => { if (e.target.id === "composer-input") autosize(e.target); });

  // ---- keyboard -----------------------------------------------------------------------------
  const coarse = window.matchMedia("(pointer: coarse)").matches;
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (t.id === "composer-input" && e.key === "Enter" && !e.shiftKey && !e.isComposing && (!coarse || e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      document.getElementById("composer").requestSubmit();
      return;
    }
    if (t.id === "composer-input" && e.key === "ArrowUp" && !t.value) {
      // Up in an empty composer edits your last message, as in SillyTavern.
      const mine = list()?.querySelectorAll("article.msg-user");
      const last = mine && mine[mine.length - 1];
      if (last) { e.preventDefault(); last.querySelector('[aria-label="Edit message"]')?.click(); }
      return;
    }
    if (t.closest?.(".edit-form") && e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault(); t.closest("form").requestSubmit(); return;
    }
    if (e.key === "Escape") {
      if (streaming) { stop(); return; }
      closePanels();
      return;
    }
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName) && t.id !== "composer-input";
    if (!typing && e.altKey && (e.key === "ArrowLeft" || e.key === "ArrowRight") && chatId()) {
      const last = list()?.querySelector("article.msg[data-last]");
      const btn = last?.querySelector(e.key === "ArrowLeft" ? ".swipe-left" : ".swipe-right");
      if (btn && !btn.disabled) { e.preventDefault(); btn.click(); }
    }
  });

  // ---- times in the reader's own zone --------------------------------------------------------
  const dayFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const dateFmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
  function localTimes(root) {
    (root || document).querySelectorAll("time[datetime]:not([data-local])").forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      const today = new Date();
      const yesterday = new Date(today.getTime() - 86400000);
      const same = (a, b) => a.toDateString() === b.toDateString();
      el.textContent = same(d, today) ? "Today at " + dayFmt.format(d)
        : same(d, yesterday) ? "Yesterday at " + dayFmt.format(d) : dateFmt.format(d);
      el.title = d.toString();
      el.dataset.local = "1";
    });
  }
  document.addEventListener("htmx:load", (e) => localTimes(e.detail.elt));
  new MutationObserver(() => localTimes()).observe(document.documentElement, { childList: true, subtree: true });

  document.addEventListener("DOMContentLoaded", () => {
    localTimes();
    if (chatEl()) {
      scrollToEnd(true, true);
      if (chatEl().dataset.generating === "true") follow();
    }
  });
})();
