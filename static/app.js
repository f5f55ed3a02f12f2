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
  // Sugo's own 5xx answers (507 the disk is full, 503 busy, 500) are a toast for #toasts, shown as the
  // 4xx ones are; htmx leaves 5xx unswapped (base.html), so another server's error page (a proxy's)
  // still never lands in the page.
  document.addEventListener("htmx:beforeSwap", (e) => {
    const xhr = e.detail.xhr;
    if (xhr.status >= 500 && xhr.getResponseHeader("HX-Retarget") === "#toasts") e.detail.shouldSwap = true;
  });

  // What an action that leaves the page has to say (what an import brought, and its left-out lorebooks)
  // is shown on the page it opens, and stays until dismissed: it may ask the user to do something.
  document.addEventListener("sugo:notices-next-page", (e) => {
    const done = e.detail.done ? [{ message: e.detail.done, kind: "ok" }] : [];
    const notices = (e.detail.notices || []).map((message) => ({ message, kind: "info" }));
    sessionStorage.setItem("sugo-notices", JSON.stringify(done.concat(notices)));
  });
  function showKeptNotices() {
    const kept = sessionStorage.getItem("sugo-notices");
    const box = document.getElementById("toasts");
    if (!kept || !box) return;
    sessionStorage.removeItem("sugo-notices");
    for (const item of JSON.parse(kept)) {
      const message = typeof item === "string" ? item : item.message;
      const el = document.createElement("div");
      el.className = "toast toast-" + (item.kind || "info") + " toast-kept";
      el.setAttribute("role", "status");
      el.textContent = message;
      const close = document.createElement("button");
      close.type = "button";
      close.className = "toast-close";
      close.setAttribute("aria-label", "Dismiss");
      close.textContent = "×";
      close.addEventListener("click", () => el.remove());
      el.appendChild(close);
      box.appendChild(el);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", showKeptNotices);
  else showKeptNotices();

  // A Fix that ended while the Chat Settings panel was closed (its own list says it otherwise): told once
  // per run, with Show.
  function announceFixEnd(el) {
    const run = el.dataset.fixRun;
    const memo = "sugo-scene-fix:" + el.dataset.chatId;
    if (!run || localStorage.getItem(memo) === run) return;
    localStorage.setItem(memo, run);
    if (document.getElementById("scenes-problems")?.offsetParent) return;  // the panel is open: its list says it
    problemsNotice(el.dataset.fixEnd, "scene-fix-notice");
  }
  function problemsNotice(message, id) {
    const box = document.getElementById("toasts");
    if (!box) return;
    const note = document.createElement("div");
    note.className = "toast toast-info toast-kept";
    note.id = id;
    note.setAttribute("role", "status");
    const text = document.createElement("span");
    text.textContent = message;
    const show = document.createElement("button");
    show.type = "button";
    show.className = "btn btn-small";
    show.textContent = "Show";
    show.addEventListener("click", () => {
      note.remove();
      const button = document.getElementById("settings-button");
      if (!button) return;
      document.addEventListener("htmx:afterSettle", function scroll(ev) {
        if (ev.detail.target?.id !== "panel-body") return;
        document.removeEventListener("htmx:afterSettle", scroll);
        document.getElementById("advanced-memory")?.scrollIntoView({ block: "start" });
      });
      button.click();
    });
    const close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    close.addEventListener("click", () => note.remove());
    note.append(text, show, close);
    box.appendChild(note);
  }

  // The Chat Summary panel polls while a run goes on and answers every click with itself. A response that
  // arrives after a newer one replaced the panel is stale: swapped into the detached panel, it made htmx
  // take the scope fields it preserves (hx-preserve) out of the page for good. It is dropped. The event is
  // dispatched on the target itself, detached or not, so the listener sits on each panel.
  document.addEventListener("htmx:load", (e) => {
    const root = e.detail.elt;
    if (!(root instanceof Element)) return;
    const panels = root.matches(".summary-panel") ? [root] : root.querySelectorAll(".summary-panel");
    for (const panel of panels) {
      panel.addEventListener("htmx:beforeSwap", (ev) => {
        if (!ev.detail.target.isConnected) ev.detail.shouldSwap = false;
      });
    }
  });

  // Advanced Memory problems: the dot on Chat Settings loads with the chat page (scenes/_problems_dot.html);
  // each set of problems is announced once, on this device: the set is remembered in localStorage, and a
  // set is announced only when it holds a problem the last one did not (not when Fix made it smaller).
  document.addEventListener("htmx:load", (e) => {
    const el = e.detail.elt;
    if (!(el instanceof Element) || !el.matches("[data-problems-key][data-announce]")) return;
    announceFixEnd(el);
    const memo = "sugo-scene-problems:" + el.dataset.chatId;
    const now = (el.dataset.problems || "").split(" ").filter(Boolean);
    el.dataset.announceChecked = "1";  // this set was weighed (the browser tests wait for it)
    if (!now.length) { localStorage.removeItem(memo); return; }
    const before = new Set((localStorage.getItem(memo) || "").split(" "));
    localStorage.setItem(memo, now.join(" "));
    if (now.every((p) => before.has(p))) return;
    const n = Number(el.dataset.problemsScenes || 0);
    problemsNotice(n ? `Advanced Memory: ${n} ${n === 1 ? "scene has" : "scenes have"} problems — Fix in Chat Settings`
                     : "Advanced Memory: the scene check failed — Fix in Chat Settings", "scene-problems-notice");
  });

  // ---- a run's status in sight ----------------------------------------------------------------
  // A panel that runs work (Chat Summary, Backfill, Missing Summaries, Prepare, Fix, Re-scan, Rebuild;
  // marked data-run-panel) answers its buttons and its polls with itself again, its status ([data-status]:
  // "Writing a summary…", a failure with Retry, the progress, the result) beside the button pressed. When
  // that status still lands out of sight (a long panel, a phone's sheet, under the sticky Save bar), it is
  // scrolled into view: after a click on a button that starts, retries or stops a run (data-run), and
  // after a poll while the old status was in sight (the user was watching it), never when the user had
  // scrolled away meanwhile, nor after the panel's other buttons (an entry's On/Off).
  function inSight(el) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth) return false;
    const pad = Math.min(8, r.width / 4, r.height / 4);  // inside rounded corners, which take no hits
    return [[r.left + pad, r.top + pad], [r.right - pad, r.top + pad], [r.left + pad, r.bottom - pad],
            [r.right - pad, r.bottom - pad], [(r.left + r.right) / 2, (r.top + r.bottom) / 2]]
      .every(([x, y]) => el.contains(document.elementFromPoint(x, y)));
  }
  // A panel may hold several statuses (Chat Summary: Backfill's at the top, Generate's by its button): the
  // one kept in sight is the one nearest to where the button pressed (or the status watched) was.
  const answered = new Map();  // panel id -> the height on screen the answer's status belongs near
  document.addEventListener("htmx:beforeSwap", (e) => {
    const panel = e.detail.target;
    if (!panel?.matches?.("[data-run-panel]") || !panel.id) return;
    const event = e.detail.requestConfig?.triggeringEvent;
    const pressed = event?.type === "click" && event.target?.closest?.("[data-run]");  // starts, retries or stops a run
    const watched = [...panel.querySelectorAll("[data-status]")].find(inSight);
    const anchor = pressed || watched;
    if (anchor) answered.set(panel.id, anchor.getBoundingClientRect().top);
  });
  document.addEventListener("htmx:afterSettle", () => {
    for (const [id, y] of answered) {
      answered.delete(id);
      const statuses = [...(document.getElementById(id)?.querySelectorAll("[data-status]") || [])];
      const near = (el) => Math.abs(el.getBoundingClientRect().top - y);
      const status = statuses.sort((a, b) => near(a) - near(b))[0];
      if (status && !inSight(status)) status.scrollIntoView({ block: "nearest" });
    }
  });
  // A page form saved (the character page, whose pictures section follows the form): the page comes back
  // scrolled where it was, and its "Saved." by the Save button may be above the screen: brought into view.
  document.addEventListener("htmx:afterSettle", (e) => {
    const status = e.detail.target?.querySelector?.(".sticky-actions [role=status]");
    if (status && !inSight(status)) status.scrollIntoView({ block: "center" });  // clear of the sticky bars
  });

  // A fold opened in the chat (the memory receipt under the last reply) unfolds downwards, below the list's
  // visible end and so behind the message box: the list scrolls just enough to show it whole.
  document.addEventListener("toggle", (e) => {
    const fold = e.target;
    if (fold.open && fold.matches?.("details") && fold.closest("#message-list")) fold.scrollIntoView({ block: "nearest" });
  }, true);

  // ---- fields the browser refuses -----------------------------------------------------------
  // The browser's own check scrolls a refused field only just into view, under the sticky Save
  // bar, and its bubble vanishes at the first scroll: the first refused field of a submit is
  // centred and focused instead, and each refused field gets its message written beside it.
  let refusing = false;
  function fieldError(field) {
    const id = (field.id || field.name) + "-error";
    let note = document.getElementById(id);
    if (!field.validity.valid) {
      if (!note) {
        note = document.createElement("p");
        note.id = id;
        note.className = "field-error";
        note.setAttribute("role", "alert");
        field.insertAdjacentElement("afterend", note);
      }
      note.textContent = field.validationMessage;
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", id);
    } else if (note) {
      note.remove();
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-describedby");
    }
  }
  document.addEventListener("invalid", (e) => {
    const field = e.target;
    e.preventDefault();
    fieldError(field);
    if (refusing) return;
    refusing = true;
    setTimeout(() => { refusing = false; });
    for (let d = field.closest("details"); d; d = d.parentElement?.closest("details")) d.open = true;
    field.focus({ preventScroll: true });
    field.scrollIntoView({ block: "center" });
  }, true);
  document.addEventListener("input", (e) => {
    if (e.target.getAttribute?.("aria-invalid") === "true") fieldError(e.target);
  });
  // A field whose change has a consequence worth saying before Save (e.g. the Day Rollover Hour).
  document.addEventListener("change", (e) => {
    const warn = e.target.dataset?.warnIfChanged;
    if (warn) document.getElementById(warn)?.toggleAttribute("hidden", e.target.value === e.target.dataset.saved);
  });

  // ---- theme --------------------------------------------------------------------------------
  document.addEventListener("click", (e) => {
    if (!e.target.closest('[data-action="toggle-theme"]')) return;
    const root = document.documentElement;
    root.dataset.theme = root.dataset.theme === "light" ? "dark" : "light";
    localStorage.setItem("sugo-theme", root.dataset.theme);
    themeColour();
  });
  // The phone's status bar takes the colour of the theme Sugo shows, which is the user's choice
  // here, not the system's: the <meta>s' media only guess before this runs.
  function themeColour() {
    const colour = getComputedStyle(document.documentElement).getPropertyValue("--bg-2").trim();
    document.querySelectorAll('meta[name="theme-color"]').forEach((m) => { if (colour) m.content = colour; });
  }
  themeColour();

  // ---- panels and dialogs -------------------------------------------------------------------
  function openPanel(id) {
    const panel = document.getElementById(id);
    if (!panel) return;
    // The panel's content is fetched anew on every open: until it arrives, show that it is loading
    // rather than the old form, whose edits the fresh one would silently replace.
    const body = panel.querySelector(".panel-body");
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
    const input = document.getElementById("composer-input");
    if (input && !busy) input.readOnly = false;
    updateActions();
  }

  // Reply shows while the chat ends on the user's message; Continue needs a reply to extend.
  function updateActions() {
    const items = list()?.querySelectorAll("article.msg");
    const last = items && items.length ? items[items.length - 1] : null;
    const busy = !!streaming;
    const bar = document.getElementById("reply-bar");
    if (bar) bar.hidden = busy || last?.dataset.role !== "user";
    const cont = document.getElementById("continue-button");
    if (cont) {
      cont.disabled = busy || last?.dataset.role !== "assistant" || last.classList.contains("is-hidden")
        || !last.querySelector(".msg-text")?.textContent.trim();
    }
    const imp = document.getElementById("impersonate-button");
    if (imp) imp.disabled = busy;
  }

  function closeMenu() {
    const menu = document.getElementById("composer-menu");
    if (!menu || menu.hidden) return false;
    menu.hidden = true;
    document.getElementById("more-button")?.setAttribute("aria-expanded", "false");
    return true;
  }

  // A whisper (group chats): the next message goes to one member only; the bar above the message box
  // says to whom until it is sent or removed.
  function showWhisper(on) {
    const bar = document.getElementById("composer-whisper");
    if (!bar) return;
    bar.hidden = !on;
    if (on) document.getElementById("whisper-select")?.focus();
  }

  // "Start the reply with": while the bar shows, every new reply or version begins with its words.
  function startWith() {
    const bar = document.getElementById("composer-start");
    const text = bar && !bar.hidden ? document.getElementById("start-with-input")?.value || "" : "";
    return text.trim() ? text : null;
  }

  function whisperTo() {
    const bar = document.getElementById("composer-whisper");
    return bar && !bar.hidden ? Number(document.getElementById("whisper-select")?.value) || null : null;
  }

  function speakerPayload(payload) {
    const speaker = document.getElementById("speaker-select")?.value;
    if (speaker) payload.speaker_id = Number(speaker);
    return payload;
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

  // The model's reasoning while it streams: a live "Thinking…" fold above the reply text, closed unless
  // the user opens it (a Continue's reasoning goes on in the fold the reply has). The server's render
  // replaces it at the end with "Thought for 12 s".
  function liveFold(item) {
    let fold = item.querySelector(".reasoning");
    if (!fold) {
      fold = document.createElement("details");
      fold.className = "reasoning";
      fold.innerHTML = '<summary><span class="reasoning-label"></span></summary><div class="reasoning-text"></div>';
      item.querySelector(".msg-text")?.before(fold);
    }
    fold.classList.add("is-thinking");
    fold.querySelector(".reasoning-label").textContent = "Thinking…";
    const live = fold.querySelector(".reasoning-text").appendChild(document.createElement("div"));
    live.className = "reasoning-live";
    return live;
  }

  async function consume(response, beforeId) {
    let textEl = null, text = "", messageId = null, action = "send";
    let item = null, thoughtEl = null, thought = "", started = false;
    const input = document.getElementById("composer-input");
    await readStream(response, async (event, data) => {
      if (event === "start") {
        action = data.action || "send";
        if (action === "impersonate") {
          // The user's next message, written into the composer: edited, then sent as usual.
          if (input) { input.value = ""; input.readOnly = true; autosize(input); }
          return;
        }
        messageId = data.message_id;
        if (streaming) streaming.messageId = messageId;
        // A new reply is new to the page; a regenerated one, or one followed after a reload, is there.
        // In a group one send may bring several replies, one stream each after the other: the later
        // ones come after what the page holds by then.
        // A Continue goes on from what the page shows: fetching the message again could bring back the
        // first words of the continuation the server has already stored, and they would show twice.
        if (document.getElementById("msg-" + messageId)) { if (action !== "continue") await refreshMessage(messageId); }
        else await appendNewMessages(started ? lastMessageId() : beforeId);
        started = true;
        text = ""; thought = ""; thoughtEl = null;
        item = document.getElementById("msg-" + messageId);
        item?.classList.add("is-streaming");
        textEl = item?.querySelector(".msg-text");
        // Every event is sent again to a page that follows the reply after a reload: the fold is rebuilt.
        if (action !== "continue") item?.querySelector(".reasoning")?.remove();
        item?.querySelector(".tool-live")?.remove();
        if (action === "continue" && textEl) {
          // The reply stays as it is; the new words stream after its last paragraph.
          const host = textEl.lastElementChild?.tagName === "P" ? textEl.lastElementChild : textEl;
          textEl = host.appendChild(document.createElement("span"));
          textEl.className = "continuation";
        } else if (textEl) textEl.innerHTML = '<span class="typing" aria-label="Writing"><i></i><i></i><i></i></span>';
      } else if (event === "token") {
        text += data.text;
        if (action === "impersonate") {
          if (input) { input.value = text; autosize(input); input.scrollTop = input.scrollHeight; }
        } else if (textEl) {
          // Plain text while streaming; the server's sanitized Markdown replaces it at the end.
          textEl.textContent = text; scrollToEnd(false);
        }
      } else if (event === "rewrite" && action === "impersonate") {
        text = data.text;
        if (input) { input.value = text; autosize(input); }
      } else if (event === "reasoning" || event === "rewrite") {
        if (!item) return;
        if (!thoughtEl) thoughtEl = liveFold(item);
        if (event === "reasoning") thought += data.text;
        else {
          // What streamed as the reply was reasoning (the template opened the block in the prompt).
          thought = data.reasoning; text = data.text;
          if (action === "continue") textEl.textContent = text;
          else if (textEl) textEl.innerHTML = '<span class="typing" aria-label="Writing"><i></i><i></i><i></i></span>';
        }
        thoughtEl.textContent = thought;
        if (thoughtEl.closest("details").open) scrollToEnd(false);
      } else if (event === "tool_call" || event === "tool_result") {
        // A tool round: one live line per call ("Using web_search…", then its outcome); the server's
        // render replaces them with the folded calls at the end. Text only: the names are the model's.
        if (!item) return;
        let live = item.querySelector(".tool-live");
        if (!live) {
          live = document.createElement("div");
          live.className = "tool-live";
          live.setAttribute("aria-live", "polite");
          item.querySelector(".msg-text")?.after(live);
        }
        let line = [...live.children].find((el) => el.dataset.call === data.id);
        if (!line) { line = live.appendChild(document.createElement("div")); line.dataset.call = data.id; }
        line.textContent = event === "tool_call" ? `Using ${data.name}…`
          : (data.notice || `${data.label || data.name}: ${data.error ? "failed" : "done"} (${data.ms} ms)`);
        scrollToEnd(false);
      } else if (event === "thought") {
        const fold = item?.querySelector(".reasoning");
        if (fold) { fold.classList.remove("is-thinking"); fold.querySelector(".reasoning-label").textContent = data.label; }
      } else if (event === "error") {
        toast(data.message, "error");
      }
      if (["done", "error", "stopped"].includes(event) && action === "impersonate" && input) {
        input.readOnly = false;
        input.focus();
        input.setSelectionRange(input.value.length, input.value.length);
      }
      if (["done", "error", "stopped"].includes(event) && (data.message_id || messageId)) {
        await refreshMessage(data.message_id || messageId);
        // A reply split at its scene breaks (Advanced Memory): the parts after the first are new.
        if (data.message_ids?.length > 1 && !document.getElementById("msg-" + data.message_ids.at(-1))) {
          await appendNewMessages(data.message_ids[0]);
        }
        scrollToEnd(false);
      }
    });
  }

  // Whether the last generate() was refused before anything was stored (the composer then gets back
  // what it sent: the text and the files).
  let startRefused = false;

  async function generate(payload) {
    startRefused = false;
    if (streaming) { toast("A reply is already being written. Stop it first.", "error"); return false; }
    const start = startWith();
    if (start && ["send", "regenerate", "swipe"].includes(payload.action)) payload.start_with = start;
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
        startRefused = true;
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
      armAuto();
    }
  }

  async function follow() {
    // A reply was being written when the page loaded (e.g. after a reload): watch it finish.
    const r = await fetch(`/api/chats/${chatId()}/generate`);
    await followAnswer(r);
  }

  async function followAnswer(r) {
    if (r.status === 200) {
      if (streaming) { r.body?.cancel(); return; }  // the user's own reply started meanwhile
      streaming = { controller: new AbortController(), messageId: null };
      setBusy(true);
      // The reply may be on the page already (after a reload) or not yet (Sugo started it by itself).
      try { await consume(r, lastMessageId()); } finally { streaming = null; setBusy(false); }
    } else if (r.status === 204 && Number(r.headers.get("X-Last-Message-Id") || 0) > lastMessageId()) {
      await appendNewMessages(lastMessageId());
      scrollToEnd(false);
    }
  }

  // Replies Sugo starts by itself (a reminder coming due) and messages written elsewhere (another tab)
  // appear without a reload: while the chat is open, idle and in sight, it asks now and then whether a
  // reply is being written or a newer message is there (a 204 with the newest id is all it costs).
  function watchChat() {
    const every = Number(chatEl()?.dataset.watchMs || 0);
    if (!every) return;
    let asking = false;
    setInterval(async () => {
      if (asking || streaming || document.hidden || !chatId()) return;
      asking = true;
      try { await followAnswer(await fetch(`/api/chats/${chatId()}/generate`)); } catch (_) { /* next time */ }
      finally { asking = false; }
    }, every);
  }

  // Auto mode (group chats): while the page is open, in sight and idle, the group takes a turn every
  // data-auto-ms (an empty send: turn-taking picks who goes on). Typing, a reply or a send starts the
  // wait again; Stop pauses it, and the Auto button pauses or resumes it.
  let autoTimer = null, autoPaused = false;
  function armAuto() {
    clearTimeout(autoTimer);
    const every = Number(chatEl()?.dataset.autoMs || 0);
    if (!every || autoPaused) return;
    autoTimer = setTimeout(async () => {
      const input = document.getElementById("composer-input");
      if (streaming || document.hidden || autoPaused || input?.value.trim()) { armAuto(); return; }
      await generate({ action: "send", content: null });
      armAuto();
    }, every);
  }

  function pauseAuto(paused) {
    autoPaused = paused;
    const button = document.getElementById("auto-mode");
    if (button) {
      button.setAttribute("aria-pressed", String(!paused));
      const every = Math.round(Number(chatEl()?.dataset.autoMs || 0) / 1000);
      button.querySelector(".auto-label").textContent = paused ? "Auto paused · click to go on" : `Auto · every ${every} s`;
    }
    armAuto();
  }

  async function stop() {
    if (!chatId()) return;
    if (Number(chatEl()?.dataset.autoMs || 0)) pauseAuto(true);
    await fetch(`/api/chats/${chatId()}/stop`, { method: "POST", headers: { "X-CSRF-Token": csrf() } });
  }

  document.addEventListener("submit", async (e) => {
    if (e.target.id !== "composer") return;
    e.preventDefault();
    const input = document.getElementById("composer-input");
    const content = input.value;
    closePicker();
    if (content.trim().toLowerCase() === "/refresh") {
      input.value = "";
      // An error answer lands in the toasts (the server retargets it there).
      await htmx.ajax("POST", `/chats/${chatId()}/refresh`, { target: "#message-list", swap: "beforeend" });
      scrollToEnd(true);
      return;
    }
    if (MEMORY_COMMAND.test(content)) {
      // /remember, /memory, /forget: the server answers with a notice for this page only (never a
      // message, never the model); a refusal (a 501-character note) is an error toast.
      const notices = () => list()?.querySelectorAll(".local-notice").length || 0;
      const before = notices();
      input.value = "";
      autosize(input);
      await htmx.ajax("POST", `/chats/${chatId()}/memory/command`,
                      { target: "#message-list", swap: "beforeend", values: { text: content } }).catch(() => {});
      // Refused (the toast says why): what was typed comes back, to be shortened rather than retyped.
      if (notices() === before && !input.value) { input.value = content; autosize(input); }
      scrollToEnd(true);
      return;
    }
    const payload = speakerPayload({ action: "send", content: content.trim() ? content : null });
    const quote = takenQuote();
    const refs = refChips();
    if ((quote !== null || refs.length) && !content.trim()) {
      toast(quote !== null ? "Write a few words to go with the excerpt: what about it?"
                           : "Write a few words to go with the other chat's memory: what should happen with it?", "error");
      input.focus();
      return;
    }
    if ((quote !== null || refs.length) && streaming) { toast("A reply is already being written. Stop it first.", "error"); return; }
    if (quote !== null) payload.quote = quote;
    if (refs.length) payload.chat_ref_ids = refs.map((c) => Number(c.dataset.chatId));
    const whisper = content.trim() ? whisperTo() : null;
    if (whisper) payload.whisper_to = whisper;
    const files = document.getElementById("composer-files");
    const chips = files ? [...files.querySelectorAll(".file-chip")] : [];
    if (chips.length) {
      if (chips.some((c) => !c.dataset.attachmentId)) { toast("Wait a moment: a file is still uploading.", "error"); return; }
      if (!content.trim()) { toast("Write a few words to go with the file: what should happen with it?", "error"); input.focus(); return; }
      if (streaming) { toast("A reply is already being written. Stop it first.", "error"); return; }
      payload.attachment_ids = chips.map((c) => Number(c.dataset.attachmentId));
      chips.forEach((c) => c.remove());
      files.hidden = true;
    }
    input.value = "";
    autosize(input);
    if (quote !== null) setQuote(null);
    refs.forEach((c) => c.remove());
    showRefs();
    if (whisper) showWhisper(false);
    const ok = await generate(payload);
    if (!ok && startRefused && whisper) showWhisper(true);  // nothing was stored: still a whisper
    if (!ok && content && !document.querySelector(".msg-user:last-of-type")) input.value = content;
    if (!ok && startRefused && chips.length) {
      // Nothing was stored: the files wait in the composer again.
      chips.forEach((c) => files.appendChild(c));
      files.hidden = false;
      input.value = content;
      autosize(input);
    }
    if (!ok && startRefused && (quote !== null || refs.length)) {
      // Nothing was stored: the excerpt and the other chats wait in the composer again.
      if (quote !== null) setQuote(quote);
      const box = document.getElementById("composer-refs");
      refs.forEach((c) => box?.appendChild(c));
      showRefs();
      input.value = content;
      autosize(input);
    }
  });

  // Files for the next message: each is uploaded as soon as it is picked (a chip shows it), and its id
  // goes with the message when it is sent. The server checks the type and the size; its sentence is
  // the toast.
  const MAX_FILES = 10;
  const MAX_FILE_BYTES = 20 * 1024 * 1024;

  function fileSize(bytes) {
    if (bytes < 1024) return bytes + " bytes";
    if (bytes < 1024 * 1024) return Math.round(bytes / 1024) + " KB";
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  async function attachFile(file) {
    const files = document.getElementById("composer-files");
    const tpl = document.getElementById("file-chip-template");
    if (!files || !tpl) return;
    if (files.querySelectorAll(".file-chip").length >= MAX_FILES) {
      toast(`A message takes at most ${MAX_FILES} files.`, "error");
      return;
    }
    if (file.size > MAX_FILE_BYTES) {
      toast(`${file.name} is larger than 20 MB; Sugo takes files up to 20 MB.`, "error");
      return;
    }
    const chip = tpl.content.firstElementChild.cloneNode(true);
    chip.querySelector(".file-name").textContent = file.name;
    chip.querySelector(".file-meta").textContent = "uploading…";
    chip.classList.add("is-uploading");
    chip.querySelector(".file-remove").setAttribute("aria-label", "Remove " + file.name);
    files.appendChild(chip);
    files.hidden = false;
    const body = new FormData();
    body.append("file", file, file.name);
    try {
      const r = await fetch(`/api/chats/${chatId()}/attachments`, { method: "POST", headers: { "X-CSRF-Token": csrf() }, body });
      const j = await r.json().catch(() => ({}));
      if (!r.ok) throw new Error(typeof j.detail === "string" ? j.detail : `The file could not be uploaded (HTTP ${r.status}).`);
      chip.dataset.attachmentId = j.id;
      chip.querySelector(".file-name").textContent = j.name;
      chip.querySelector(".file-meta").textContent = fileSize(j.size) + (j.pages ? ` · ${j.pages} page${j.pages === 1 ? "" : "s"}` : "");
      chip.classList.remove("is-uploading");
    } catch (err) {
      chip.remove();
      files.hidden = !files.querySelector(".file-chip");
      toast(`${file.name}: ${err.message === "Failed to fetch" ? "Sugo's server did not answer." : err.message}`, "error");
    }
  }

  document.addEventListener("click", (e) => {
    if (e.target.closest("#attach-button")) document.getElementById("attach-input")?.click();
    const remove = e.target.closest(".file-remove");
    if (!remove) return;
    const chip = remove.closest(".file-chip");
    const files = document.getElementById("composer-files");
    const id = chip.dataset.attachmentId;
    chip.remove();
    if (files) files.hidden = !files.querySelector(".file-chip");
    document.getElementById("composer-input")?.focus();
    if (id) fetch(`/api/chats/${chatId()}/attachments/${id}`, { method: "DELETE", headers: { "X-CSRF-Token": csrf() } });
  });

  document.addEventListener("change", (e) => {
    if (e.target.id !== "attach-input") return;
    const picked = [...e.target.files];
    e.target.value = "";  // the same file may be picked again after a removal
    picked.forEach(attachFile);
  });

  // ---- the memory of this chat: commands, other chats with @, a reply to an excerpt ---------------
  // The whole message is the command (case-insensitive), in English or Portuguese.
  const MEMORY_COMMAND = /^\s*\/(remember|lembrar|memory|memoria|memória|forget|esquecer)(\s|$)/i;
  // A notice answering a command lives on this page only (the server never stores it): Dismiss removes it.
  document.addEventListener("click", (e) => {
    const close = e.target.closest(".local-notice .notice-close");
    if (!close) return;
    close.closest(".local-notice").remove();
    // Not on a phone, where focus in the message box opens the keyboard over half the chat.
    if (!coarse) document.getElementById("composer-input")?.focus({ preventScroll: true });
  });

  // Another chat's memory for the next message: `@` at the start or after a space opens the list of the
  // user's other chats with a memory (the server leaves out this one and those without); the text from
  // `@` to the caret filters it. Choosing one drops that text and adds a chip; the chips' chat ids go
  // with the message.
  const MAX_REFS = 3;
  const REF_FILTER_MAX = 100;  // a longer "filter" is a sentence, not a name being looked up
  const picker = { open: false, start: null, filter: "", items: [], active: -1, asked: 0, timer: 0 };
  const refChips = () => [...(document.getElementById("composer-refs")?.querySelectorAll(".ref-chip") || [])];
  function showRefs() {
    const box = document.getElementById("composer-refs");
    if (box) box.hidden = !box.querySelector(".ref-chip");
  }
  // The `@filter` just before the caret, or null: {start: where the `@` is, filter: what follows it}.
  function atToken(input) {
    if (input.selectionStart !== input.selectionEnd) return null;
    const before = input.value.slice(0, input.selectionStart);
    const m = /(^|\s)@([^\s@]*)$/.exec(before);
    if (!m || m[2].length > REF_FILTER_MAX) return null;
    return { start: before.length - m[2].length - 1, filter: m[2] };
  }
  function setPickerA11y(open) {
    const input = document.getElementById("composer-input");
    if (!input) return;
    // No aria-expanded: a textarea is a textbox, which may not carry it (axe); the list it controls and
    // the option it points at say it.
    input.setAttribute("aria-autocomplete", "list");
    if (open) input.setAttribute("aria-controls", "chat-ref-list"); else input.removeAttribute("aria-controls");
    const item = open && picker.active >= 0 ? document.getElementById("chat-ref-list")?.children[picker.active] : null;
    if (item) input.setAttribute("aria-activedescendant", item.id); else input.removeAttribute("aria-activedescendant");
  }
  function openPicker(start, filter) {
    const box = document.getElementById("chat-ref-picker");
    if (!box) return;
    const again = picker.open && picker.filter === filter;
    if (!picker.open) {
      // Nothing from the last time it was open: the list fills when this answer comes.
      picker.items = [];
      picker.active = -1;
      document.getElementById("chat-ref-list")?.replaceChildren();
      document.getElementById("chat-ref-empty")?.setAttribute("hidden", "");
    }
    picker.open = true;
    picker.start = start;
    picker.filter = filter;
    box.hidden = false;
    fitPicker();
    setPickerA11y(true);
    if (again) return;
    clearTimeout(picker.timer);
    picker.asked += 1;  // the answer for the filter before this one is stale already
    picker.timer = setTimeout(() => askOthers(filter), 120);
  }
  // The list fits between the top of what is visible and the message box: on a phone the keyboard
  // takes the bottom half of the screen (the visual viewport), and the list must not run off its top.
  function fitPicker() {
    const box = document.getElementById("chat-ref-picker");
    const composer = document.getElementById("composer");
    if (!box || box.hidden || !composer) return;
    const top = window.visualViewport ? window.visualViewport.offsetTop : 0;
    const room = composer.getBoundingClientRect().top - top - 16;
    box.style.maxHeight = Math.round(Math.max(120, Math.min(352, room))) + "px";
  }
  window.visualViewport?.addEventListener("resize", fitPicker);
  function closePicker() {
    clearTimeout(picker.timer);
    picker.asked += 1;  // an answer still on its way is stale now
    picker.open = false;
    picker.start = null;
    picker.filter = "";
    picker.active = -1;
    const box = document.getElementById("chat-ref-picker");
    if (box) box.hidden = true;
    setPickerA11y(false);
  }
  async function askOthers(filter) {
    const asked = ++picker.asked;
    let items;
    try {
      const r = await fetch(`/api/chats/${chatId()}/memory/others?q=${encodeURIComponent(filter)}`);
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      items = await r.json();
    } catch (err) {
      if (asked === picker.asked) { closePicker(); toast("The list of other chats could not be read: " + err.message, "error"); }
      return;
    }
    if (asked !== picker.asked || !picker.open) return;  // a newer filter was typed meanwhile
    picker.items = items;
    picker.active = items.length ? 0 : -1;
    const options = document.getElementById("chat-ref-list");
    const empty = document.getElementById("chat-ref-empty");
    if (!options) return;
    options.replaceChildren(...items.map((chat, i) => {
      const li = document.createElement("li");
      li.id = "chat-ref-option-" + chat.id;
      li.className = "ref-option";
      li.setAttribute("role", "option");
      li.dataset.index = i;
      const title = li.appendChild(document.createElement("span"));
      title.className = "ref-option-title";
      title.textContent = chat.title;
      const first = li.appendChild(document.createElement("span"));
      first.className = "ref-option-first muted small";
      first.textContent = chat.first_request || "";
      return li;
    }));
    options.hidden = !items.length;
    if (empty) empty.hidden = items.length > 0;
    markActive();
  }
  function markActive() {
    const options = document.getElementById("chat-ref-list");
    [...(options?.children || [])].forEach((li, i) => li.setAttribute("aria-selected", i === picker.active ? "true" : "false"));
    options?.children[picker.active]?.scrollIntoView({ block: "nearest" });
    setPickerA11y(picker.open);
  }
  function chooseRef(index) {
    const chat = picker.items[index];
    const input = document.getElementById("composer-input");
    if (!chat || !input) return;
    const token = picker.start !== null ? atToken(input) : null;
    if (token) {
      // The `@filter` typed was only for finding the chat: it goes.
      input.value = input.value.slice(0, token.start) + input.value.slice(input.selectionStart);
      input.setSelectionRange(token.start, token.start);
      autosize(input);
    }
    closePicker();
    input.focus();
    const box = document.getElementById("composer-refs");
    const tpl = document.getElementById("ref-chip-template");
    if (!box || !tpl) return;
    const chips = refChips();
    if (chips.some((c) => Number(c.dataset.chatId) === chat.id)) return;
    if (chips.length >= MAX_REFS) { toast(`A message takes at most ${MAX_REFS} other chats' memories.`, "error"); return; }
    const chip = tpl.content.firstElementChild.cloneNode(true);
    chip.dataset.chatId = chat.id;
    chip.querySelector(".ref-title").textContent = chat.title;
    chip.querySelector(".ref-remove")?.setAttribute("aria-label", `Remove the memory of “${chat.title}”`);
    box.appendChild(chip);
    showRefs();
  }
  function followCaret(e) {
    if (e.target.id !== "composer-input") return;
    const token = atToken(e.target);
    if (token) openPicker(token.start, token.filter);
    else if (picker.open && (e.type === "input" || picker.start !== null)) closePicker();
  }
  document.addEventListener("input", followCaret);
  // The caret moved away from the `@filter` (←/→, a click in the text): the list follows it.
  document.addEventListener("keyup", (e) => { if (["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) followCaret(e); });
  document.addEventListener("click", followCaret);
  // Keys while the list is open belong to it: before the composer's own (Enter sends, ↑ edits the last
  // message, Escape stops a reply or closes a panel).
  document.addEventListener("keydown", (e) => {
    if (!picker.open || e.target.id !== "composer-input" || e.isComposing) return;
    const n = picker.items.length;
    const options = document.getElementById("chat-ref-list");
    const shown = options && !options.hidden && n;
    let handled = true;
    if (e.key === "Escape") closePicker();
    else if (e.key === "ArrowDown" && shown) { picker.active = (picker.active + 1) % n; markActive(); }
    else if (e.key === "ArrowUp" && shown) { picker.active = (picker.active + n - 1) % n; markActive(); }
    else if ((e.key === "Enter" || e.key === "Tab") && !e.shiftKey && shown && picker.active >= 0) chooseRef(picker.active);
    else handled = false;
    if (handled) { e.preventDefault(); e.stopPropagation(); }
  }, true);
  // The mouse and a finger choose too; pressing an option leaves the focus (and the phone's keyboard) in the box.
  document.addEventListener("mousedown", (e) => { if (e.target.closest("#chat-ref-list .ref-option")) e.preventDefault(); });
  document.addEventListener("click", (e) => {
    const option = e.target.closest("#chat-ref-list .ref-option");
    if (option) { chooseRef(Number(option.dataset.index)); return; }
    if (e.target.closest("#use-other-chat")) {
      // The empty chat's "Use another chat": the same list, every chat in it, ready for the keyboard.
      const input = document.getElementById("composer-input");
      input?.focus();
      openPicker(null, "");
      return;
    }
    const remove = e.target.closest(".ref-chip .ref-remove");
    if (remove) {
      remove.closest(".ref-chip").remove();
      showRefs();
      document.getElementById("composer-input")?.focus();
      return;
    }
    if (picker.open && !e.target.closest("#chat-ref-picker, #composer-input")) closePicker();
  });

  // A reply to an excerpt: text selected inside one reply shows Reply beside the selection (on a phone
  // above it, clear of the selection handles and the browser's own menu below); Alt+R does the same.
  // The excerpt waits above the message box and goes with the next message as its quote.
  const MAX_QUOTE = 2000;
  let offered = null;  // the words Reply was shown for: a tap on it may collapse the selection before its click lands
  let pressingQuote = false;
  function selectedExcerpt() {
    const sel = document.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return null;
    const range = sel.getRangeAt(0);
    const replyText = (n) => (n.nodeType === Node.ELEMENT_NODE ? n : n.parentElement)?.closest("article.msg-assistant .msg-text");
    const from = replyText(range.startContainer);
    if (!from || from !== replyText(range.endContainer) || from.closest(".is-streaming")) return null;
    const words = sel.toString().trim();
    return words ? { range, words } : null;
  }
  function placeQuoteButton() {
    const button = document.getElementById("quote-reply-button");
    if (!button) return;
    const found = selectedExcerpt();
    const rects = found ? [...found.range.getClientRects()].filter((r) => r.width && r.height) : [];
    if (!rects.length) {
      if (!pressingQuote) { button.hidden = true; offered = null; }
      return;
    }
    const bounds = list()?.getBoundingClientRect() || { top: 0, bottom: innerHeight };
    if (rects.at(-1).bottom < bounds.top || rects[0].top > bounds.bottom) { button.hidden = true; return; }  // scrolled away
    offered = found.words;
    button.hidden = false;
    const w = button.offsetWidth, h = button.offsetHeight;
    let x, y;
    if (coarse) {
      // Above the selection's first line, centred on it.
      const first = rects[0];
      x = first.left + first.width / 2 - w / 2;
      y = first.top - h - 10;
    } else {
      // Just above and to the right of where the selection ends.
      const last = rects[rects.length - 1];
      x = last.right + 2;
      y = last.top - h - 2;
    }
    x = Math.max(8, Math.min(x, innerWidth - w - 8));
    y = Math.max(bounds.top + 4, Math.min(y, bounds.bottom - h - 4));
    button.style.left = Math.round(x) + "px";
    button.style.top = Math.round(y) + "px";
  }
  document.addEventListener("selectionchange", placeQuoteButton);
  document.addEventListener("scroll", (e) => { if (e.target.id === "message-list") placeQuoteButton(); }, true);
  window.addEventListener("resize", placeQuoteButton);
  function setQuote(text) {
    const box = document.getElementById("composer-quote");
    const shown = document.getElementById("composer-quote-text");
    if (!box || !shown) return;
    shown.textContent = text || "";
    box.hidden = text === null;
  }
  // The excerpt waiting in the composer, or null.
  function takenQuote() {
    const box = document.getElementById("composer-quote");
    const text = document.getElementById("composer-quote-text")?.textContent || "";
    return box && !box.hidden && text.trim() ? text : null;
  }
  function quoteSelection(fromButton) {
    const words = selectedExcerpt()?.words || (fromButton ? offered : null);
    pressingQuote = false;
    offered = null;
    const button = document.getElementById("quote-reply-button");
    if (button) button.hidden = true;
    if (!words) return;
    const chars = Array.from(words);  // by characters, so an emoji is never cut in half
    if (chars.length > MAX_QUOTE) {
      toast(`The excerpt is long: its first ${MAX_QUOTE.toLocaleString("en")} characters are quoted.`, "info");
    }
    setQuote(chars.length > MAX_QUOTE ? chars.slice(0, MAX_QUOTE - 1).join("") + "…" : words);
    document.getSelection().removeAllRanges();
    document.getElementById("composer-input")?.focus({ preventScroll: true });
  }
  document.addEventListener("pointerdown", (e) => {
    if (!e.target.closest("#quote-reply-button")) return;
    pressingQuote = true;
    e.preventDefault();  // the selection stays until the click has taken it
  });
  document.addEventListener("pointerup", () => { setTimeout(() => { pressingQuote = false; }); });
  document.addEventListener("click", (e) => {
    if (e.target.closest("#quote-reply-button")) { quoteSelection(true); return; }
    if (e.target.closest("#composer-quote-remove")) {
      setQuote(null);
      document.getElementById("composer-input")?.focus();
    }
  });
  document.addEventListener("keydown", (e) => {
    // The key's code, not its character: on a Mac, Option+R types "®".
    if (!e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.code !== "KeyR" || !chatId()) return;
    if (selectedExcerpt()) { e.preventDefault(); quoteSelection(false); }
  });

  // Reply, Continue, Impersonate: the server refuses what does not fit the chat (a toast says why).
  function runAction(name) {
    closeMenu();
    if (!chatId()) return;
    if (name === "whisper") { showWhisper(true); return; }
    if (name === "start-with") {
      document.getElementById("composer-start").hidden = false;
      document.getElementById("start-with-input").focus();
      return;
    }
    if (name === "reply") generate(speakerPayload({ action: "send", content: null }));
    else if (name === "continue") generate({ action: "continue" });
    else if (name === "impersonate") generate(speakerPayload({ action: "impersonate" }));
  }

  document.addEventListener("click", (e) => {
    const more = e.target.closest("#more-button");
    if (more) {
      const menu = document.getElementById("composer-menu");
      if (!closeMenu() && menu) {
        updateActions();
        menu.hidden = false;
        more.setAttribute("aria-expanded", "true");
        menu.querySelector("button:not(:disabled)")?.focus();
      }
      return;
    }
    if (!e.target.closest("#composer-menu")) closeMenu();
    if (e.target.closest("#composer-whisper-remove")) { showWhisper(false); document.getElementById("composer-input")?.focus(); return; }
    if (e.target.closest("#composer-start-remove")) {
      document.getElementById("composer-start").hidden = true;
      document.getElementById("composer-input")?.focus();
      return;
    }
    // Who sees a message: Cancel closes the form under it.
    const cancel = e.target.closest("[data-close-audience]");
    if (cancel) { cancel.closest(".msg-audience").innerHTML = ""; return; }
    const act = e.target.closest('[data-action="reply"], [data-action="continue"], [data-action="impersonate"], [data-action="whisper"], [data-action="start-with"]');
    if (act && !act.disabled) runAction(act.dataset.action);
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
    const inOtherField = ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName) && t.id !== "composer-input";
    if (chatId() && !inOtherField && e.altKey && !e.ctrlKey && !e.metaKey && !e.shiftKey && !e.isComposing) {
      // Alt+Enter continues the last reply (as in SillyTavern); Alt+I impersonates. The key's
      // code, not its character: on a Mac, Option+I types a dead key.
      if (e.key === "Enter") { e.preventDefault(); runAction("continue"); return; }
      if (e.code === "KeyI") { e.preventDefault(); runAction("impersonate"); return; }
    }
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
    if (t.closest?.("#composer-menu") && (e.key === "ArrowDown" || e.key === "ArrowUp")) {
      const items = [...document.querySelectorAll("#composer-menu button:not(:disabled)")];
      const at = items.indexOf(t);
      items[(at + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length]?.focus();
      e.preventDefault();
      return;
    }
    if (e.key === "Escape") {
      if (streaming) { stop(); return; }
      if (closeMenu()) { document.getElementById("more-button")?.focus(); return; }
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

  // ---- focus: the skip link, one tab stop per message ------------------------------------------
  // The skip link (the page's first Tab stop) moves focus, not only the scroll: a fragment link to the
  // message box would leave focus at the top of the page.
  document.addEventListener("click", (e) => {
    const skip = e.target.closest(".skip-link");
    const target = skip && document.querySelector(skip.getAttribute("href"));
    if (!target) return;
    e.preventDefault();
    target.focus();
  });

  // A message's controls outside its text (the toolbar, the version arrows, the memory receipt, folds)
  // are one stop for Tab: the one used last, else the toolbar's first, takes the stop (tabindex 0, the
  // others -1); ←/→ and Home/End move among them and Tab leaves the message. Before, reaching the message
  // box of a 60-message chat took 259 Tabs. Links inside the message's text stay stops of their own.
  const ROVING = "button, summary";
  function roveItems(msg, usable) {
    const all = [...msg.querySelectorAll(ROVING)].filter((el) => !el.closest(".msg-text, .edit-form"));
    const ordered = [...all.filter((el) => el.closest(".msg-actions")), ...all.filter((el) => !el.closest(".msg-actions"))];
    return usable ? ordered.filter((el) => !el.disabled && el.getClientRects().length) : ordered;
  }
  function rove(msg, current) {
    const all = roveItems(msg, false);
    const usable = roveItems(msg, true);
    const keep = usable.includes(current) ? current
      : usable.find((el) => el.getAttribute("tabindex") === "0") || usable[0];
    all.forEach((el) => el.setAttribute("tabindex", el === keep ? "0" : "-1"));
  }
  function roveAll() {
    list()?.querySelectorAll("article.msg").forEach((msg) => {
      if (!msg.querySelector('[tabindex="0"]')) rove(msg);
    });
  }
  // A message's button that re-renders the message (Hide, a version arrow) would drop the focus to the
  // page's top: the new message's button in the same place takes it back.
  let refocus = null;
  document.addEventListener("htmx:beforeSwap", (e) => {
    const msg = document.activeElement?.closest?.("#message-list article.msg");
    refocus = msg && e.detail.target === msg ? { id: msg.id, at: roveItems(msg, true).indexOf(document.activeElement) } : null;
  });
  document.addEventListener("htmx:afterSettle", () => {
    if (!refocus) return;
    const msg = document.getElementById(refocus.id);
    const items = msg ? roveItems(msg, true) : [];
    if (items.length && !msg.contains(document.activeElement)) items[Math.max(0, Math.min(refocus.at, items.length - 1))].focus();
    refocus = null;
  });
  document.addEventListener("focusin", (e) => {
    const msg = e.target.closest?.("#message-list article.msg");
    if (msg && e.target.matches(ROVING) && roveItems(msg, false).includes(e.target)) rove(msg, e.target);
  });
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    if (!["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) return;
    const msg = e.target.closest?.("#message-list article.msg");
    if (!msg || !e.target.matches(ROVING)) return;
    const items = roveItems(msg, true);
    const at = items.indexOf(e.target);
    if (at < 0) return;
    const next = e.key === "Home" ? 0 : e.key === "End" ? items.length - 1
      : (at + (e.key === "ArrowRight" ? 1 : items.length - 1)) % items.length;
    e.preventDefault();
    items[next].focus();
  });

  // ---- message numbers (Chat Summary's Range counts them) -------------------------------------
  // Counted from the topmost page's start, so a deleted message renumbers the ones after it.
  function numberMessages() {
    const start = list()?.querySelector("[data-msg-offset]");
    if (!start) return;
    let n = parseInt(start.dataset.msgOffset, 10) || 0;
    list().querySelectorAll("article.msg").forEach((el) => {
      n += 1;
      const num = el.querySelector(".msg-num");
      if (num && num.textContent !== "#" + n) num.textContent = "#" + n;
    });
  }

  // ---- summarised messages folded (Chat Summary with "Hide summarised messages") ----------------
  // Each run of neighbouring messages the prompt leaves out (data-summarised, set by the server) folds
  // into one line with Show; a message hidden from the AI or a refresh mark ends a run. A run the user
  // opened stays open while messages around it come and go. With Collapse hidden messages off the
  // server marks them data-summarised="shown": they stay in view, dimmed and marked, and never fold.
  const openRuns = new Set();
  function foldSummarised() {
    const box = list();
    if (!box) return;
    const runs = [];
    let run = null;
    for (const el of box.children) {
      if (el.classList.contains("summary-fold")) continue;
      if (el.matches('article.msg[data-summarised]:not([data-summarised="shown"])')) {
        if (!run) runs.push((run = []));
        run.push(el);
      } else run = null;
    }
    const keep = new Set();
    for (const r of runs) {
      const first = r[0].dataset.id;
      let fold = r[0].previousElementSibling;
      if (!fold || !fold.classList.contains("summary-fold") || fold.dataset.first !== first) {
        fold = document.createElement("div");
        fold.className = "summary-fold";
        fold.dataset.first = first;
        fold.innerHTML = '<span class="summary-fold-text"></span> · <button type="button" class="link-btn summary-fold-toggle" aria-expanded="false"></button>';
        box.insertBefore(fold, r[0]);
      }
      keep.add(fold);
      const open = openRuns.has(first);
      const num = (el) => (el.querySelector(".msg-num")?.textContent || "").replace("#", "");
      const [a, b] = [num(r[0]), num(r[r.length - 1])];
      const text = r.length === 1 ? `Message ${a} is summarised and not sent`
        : a && b ? `Messages ${a}–${b} are summarised and not sent` : `${r.length} messages are summarised and not sent`;
      const label = fold.querySelector(".summary-fold-text");
      if (label.textContent !== text) label.textContent = text;
      const btn = fold.querySelector("button");
      if (btn.textContent !== (open ? "Hide" : "Show")) btn.textContent = open ? "Hide" : "Show";
      btn.setAttribute("aria-expanded", open ? "true" : "false");
      r.forEach((el) => el.classList.toggle("is-folded", !open));
    }
    box.querySelectorAll(":scope > .summary-fold").forEach((f) => { if (!keep.has(f)) f.remove(); });
    box.querySelectorAll(':scope > article.is-folded:not([data-summarised]), :scope > article.is-folded[data-summarised="shown"]').forEach((el) => el.classList.remove("is-folded"));
  }
  document.addEventListener("click", (e) => {
    const btn = e.target.closest(".summary-fold-toggle");
    if (!btn) return;
    const first = btn.closest(".summary-fold").dataset.first;
    if (openRuns.has(first)) openRuns.delete(first); else openRuns.add(first);
    foldSummarised();
  });

  // ---- lists with shift-click range selection (Chat Summary) ----------------------------------
  // A shift-click sets every checkbox between the last one clicked and this one to this one's state.
  let lastPicked = null;
  document.addEventListener("click", (e) => {
    const box = e.target.closest("[data-range-select] input[type=checkbox]");
    if (!box) return;
    const group = box.closest("[data-range-select]");
    const boxes = Array.from(group.querySelectorAll("input[type=checkbox]"));
    if (e.shiftKey && lastPicked && boxes.includes(lastPicked)) {
      const [a, b] = [boxes.indexOf(lastPicked), boxes.indexOf(box)].sort((x, y) => x - y);
      boxes.slice(a, b + 1).forEach((el) => { el.checked = box.checked; });
    }
    lastPicked = box;
  });
  // ---- repeated fields (Key Details: one field per detail, so a detail keeps its line breaks) ----
  // [data-repeat] holds [data-repeat-item]s, a <template> of a new one and an add button.
  document.addEventListener("click", (e) => {
    const add = e.target.closest("[data-repeat-add]");
    if (add) {
      const box = add.closest("[data-repeat]");
      const item = box.querySelector("template").content.firstElementChild.cloneNode(true);
      add.before(item);
      item.querySelector("textarea, input")?.focus();
      return;
    }
    const remove = e.target.closest("[data-repeat-remove]");
    if (remove) {
      const box = remove.closest("[data-repeat]");
      remove.closest("[data-repeat-item]").remove();
      box.querySelector("[data-repeat-add]")?.focus(); // focus stays in the list, not lost to <body>
    }
  });
  // A swapped-in status that replaced the focused control (Write now's progress, then its result)
  // takes the focus, and so comes into view, unless the user has moved on to another field.
  document.addEventListener("htmx:load", (e) => {
    const root = e.detail.elt;
    const el = root.matches?.("[data-focus-if-lost]") ? root : root.querySelector?.("[data-focus-if-lost]");
    const now = document.activeElement;
    const lost = !now || now === document.body || now.tagName === "DIALOG";
    if (el && lost) el.focus();
  });
  // Enter in a field of a panel that lives inside a bigger form must not submit that form.
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target.matches && e.target.matches("input[data-no-submit]")) e.preventDefault();
  });

  // ---- the preset editor: sections in order (buttons, Alt+arrows, drag), choices and their options ----
  const moveStatus = (text) => { const el = document.getElementById("preset-move-status"); if (el) el.textContent = text; };
  const sectionName = (row) => row.querySelector("[name=section_name]")?.value || "Section";
  function moveSection(row, step) {
    const list = row.parentElement;
    const rows = Array.from(list.children);
    const to = rows.indexOf(row) + step;
    if (to < 0 || to >= rows.length) return;
    if (step < 0) list.insertBefore(row, rows[to]); else list.insertBefore(row, rows[to].nextSibling);
    moveStatus(`${sectionName(row)}: position ${to + 1} of ${rows.length}`);
  }
  document.addEventListener("click", (e) => {
    const move = e.target.closest("[data-section] [data-move]");
    if (move) {
      moveSection(move.closest("[data-section]"), move.dataset.move === "up" ? -1 : 1);
      move.focus(); // the button moved with its section; keep it under the keyboard
      return;
    }
    const remove = e.target.closest("[data-section-remove]");
    if (remove) {
      const row = remove.closest("[data-section]");
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      (next?.querySelector("[name=section_name]") || document.querySelector("[data-section-add]"))?.focus();
      return;
    }
    if (e.target.closest("[data-section-add]")) {
      const item = document.getElementById("preset-section-template").content.firstElementChild.cloneNode(true);
      document.getElementById("preset-sections").append(item);
      item.querySelector("[name=section_name]").select();
      return;
    }
    if (e.target.closest("[data-choice-add]")) {
      const key = "n" + Date.now().toString(36);
      const html = document.getElementById("preset-choice-template").innerHTML.replaceAll("__KEY__", key);
      const box = document.getElementById("preset-choices");
      box.insertAdjacentHTML("beforeend", html);
      box.lastElementChild.querySelector("[name=choice_variable]").focus();
      return;
    }
    const addOption = e.target.closest("[data-option-add]");
    if (addOption) {
      const key = addOption.closest("[data-options]").dataset.key;
      const html = document.getElementById("preset-option-template").innerHTML.replaceAll("__KEY__", key);
      addOption.insertAdjacentHTML("beforebegin", html);
      addOption.previousElementSibling.querySelector("input[type=text]").focus();
      return;
    }
    const dropOption = e.target.closest("[data-option-remove]");
    if (dropOption) {
      const box = dropOption.closest("[data-options]");
      dropOption.closest("[data-option]").remove();
      box.querySelector("[data-option-add]").focus();
      return;
    }
    const dropChoice = e.target.closest("[data-choice-remove]");
    if (dropChoice) {
      dropChoice.closest("[data-choice]").remove();
      document.querySelector("[data-choice-add]")?.focus();
    }
  });
  document.addEventListener("change", (e) => {
    const box = e.target.closest("[data-enabled-box]");
    if (box) {
      const row = box.closest("[data-section]");
      row.querySelector("[data-enabled-value]").value = box.checked ? "1" : "0";
      row.classList.toggle("is-off", !box.checked);
    }
    const place = e.target.closest("[data-placement]");
    if (place) place.closest("[data-section]").querySelector("[data-depth]").hidden = place.value !== "depth";
    const multi = e.target.closest("[data-multi-box]");
    if (multi) multi.closest("[data-choice]").querySelector("[data-multi-value]").value = multi.checked ? "1" : "0";
    const marker = e.target.closest("[data-marker-add]");
    if (marker && marker.value) {
      const tpl = document.querySelector(`template[data-marker-template="${CSS.escape(marker.value)}"]`);
      const item = tpl.content.firstElementChild.cloneNode(true);
      document.getElementById("preset-sections").append(item);
      marker.querySelector(`option[value="${CSS.escape(marker.value)}"]`).remove();
      marker.value = "";
      item.querySelector("[data-move]").focus();
      moveStatus(`${sectionName(item)} added at the end`);
    }
  });
  document.addEventListener("keydown", (e) => {
    if (!e.altKey || (e.key !== "ArrowUp" && e.key !== "ArrowDown")) return;
    const row = e.target.closest?.("[data-section]");
    if (!row) return;
    e.preventDefault();
    const focused = e.target;
    moveSection(row, e.key === "ArrowUp" ? -1 : 1);
    focused.focus();
  });
  let dragged = null;
  document.addEventListener("dragstart", (e) => {
    const row = e.target.closest?.("[data-section]");
    if (!row || e.target.matches?.("input, textarea, select")) return;
    dragged = row;
    row.classList.add("is-dragging");
    e.dataTransfer.effectAllowed = "move";
  });
  document.addEventListener("dragover", (e) => {
    const over = e.target.closest?.("[data-section]");
    if (!dragged || !over || over === dragged) return;
    e.preventDefault();
    const below = e.clientY > over.getBoundingClientRect().top + over.offsetHeight / 2;
    over.parentElement.insertBefore(dragged, below ? over.nextSibling : over);
  });
  document.addEventListener("dragend", () => {
    if (!dragged) return;
    dragged.classList.remove("is-dragging");
    const rows = Array.from(dragged.parentElement.children);
    moveStatus(`${sectionName(dragged)}: position ${rows.indexOf(dragged) + 1} of ${rows.length}`);
    dragged = null;
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
      // The end of a span on its start's day gives only the time: "Today at 09:31 PM – 09:45 PM".
      const start = el.hasAttribute("data-span-end") ? el.parentElement.querySelector("time[datetime]") : null;
      const startDay = start ? new Date(start.getAttribute("datetime")) : null;
      el.textContent = startDay && same(startDay, d) ? dayFmt.format(d)
        : same(d, today) ? "Today at " + dayFmt.format(d)
        : same(d, yesterday) ? "Yesterday at " + dayFmt.format(d) : dateFmt.format(d);
      el.title = d.toString();
      el.dataset.local = "1";
    });
  }
  document.addEventListener("htmx:load", (e) => localTimes(e.detail.elt));
  new MutationObserver(() => localTimes()).observe(document.documentElement, { childList: true, subtree: true });

  // ---- installed as an app ----------------------------------------------------------------------
  // Browsers allow a service worker only on a secure context: https, or localhost on this computer.
  if ("serviceWorker" in navigator && window.isSecureContext) {
    navigator.serviceWorker.register("/sw.js").catch(() => {});
  }

  document.addEventListener("DOMContentLoaded", () => {
    localTimes();
    // The Tools section's tab row scrolls sideways on a phone: the page's own tab is brought into it.
    const tab = document.querySelector('.tool-tabs [aria-current="page"]');
    if (tab) tab.parentElement.scrollLeft = tab.offsetLeft - (tab.parentElement.clientWidth - tab.offsetWidth) / 2;
    if (chatEl()) {
      scrollToEnd(true, true);
      updateActions();
      // Messages come and go by htmx swaps (a delete, a new reply): the actions follow.
      new MutationObserver(updateActions).observe(list(), { childList: true });
      numberMessages();
      foldSummarised();
      roveAll();
      // A fold inserted here calls this once more, which then changes nothing.
      new MutationObserver(() => { numberMessages(); foldSummarised(); roveAll(); }).observe(list(), { childList: true });
      if (chatEl().dataset.generating === "true") follow();
      // Toasts sit just above the message box, however tall a quote and chips make it (they would
      // cover the very things a refusal gave back).
      const composer = document.getElementById("composer");
      const room = () => document.body.style.setProperty("--composer-room", Math.round(innerHeight - composer.getBoundingClientRect().top + 8) + "px");
      if (composer && window.ResizeObserver) { new ResizeObserver(room).observe(composer); window.addEventListener("resize", room); }
      watchChat();
      armAuto();
      document.getElementById("composer-input")?.addEventListener("input", armAuto);
      document.getElementById("auto-mode")?.addEventListener("click", () => pauseAuto(!autoPaused));
      // Desktop: the message box has focus when a chat opens, ready to type. Not on a phone, where
      // focus opens the on-screen keyboard over half the chat.
      const input = document.getElementById("composer-input");
      if (input && !coarse && (document.activeElement === document.body || !document.activeElement)) input.focus({ preventScroll: true });
    }
  });
})();

// ---- the `/` palette and reading comfort (issue 29) ----------------------------------------------
// Its own block, talking to the rest only through the page: the palette fills the message box and
// submits the composer, so /refresh and the memory commands run by the submit paths above.
(function () {
  "use strict";

  // The `/` palette. The chat page renders every registered command into #slash-list (app/web/commands.py);
  // a message box holding only "/word" opens it, the word filters it. ↑/↓ choose, Enter runs (a command
  // that takes an argument is completed instead, for the user to go on typing), Tab completes, Esc
  // closes. With only "/" typed nothing is chosen yet, so a stray Enter runs nothing.
  const palette = { open: false, active: -1 };
  const box = () => document.getElementById("slash-palette");
  const input = () => document.getElementById("composer-input");
  const shownOptions = () => [...document.querySelectorAll("#slash-list .slash-option:not([hidden])")];
  const TOKEN = /^\/([^\s/]*)$/;

  function slashFilter() {
    const el = input();
    if (!el || el.selectionStart !== el.selectionEnd || el.selectionEnd !== el.value.length) return null;
    const m = TOKEN.exec(el.value);
    return m ? m[1].normalize("NFC").toLowerCase() : null;
  }
  function showPalette(filter) {
    const el = box();
    if (!el) return;
    const options = [...el.querySelectorAll(".slash-option")];
    // A word the filter starts is a match (the name or an alias: "/esq" finds /forget); past two
    // letters a word that merely contains it also is.
    const starts = (o) => o.dataset.words.split(" ").some((w) => w.startsWith(filter));
    options.forEach((o) => {
      o.hidden = !starts(o) && !(filter.length > 1 && o.dataset.words.split(" ").some((w) => w.includes(filter)));
    });
    const shown = shownOptions();
    document.getElementById("slash-empty").hidden = shown.length > 0;
    document.getElementById("slash-list").hidden = !shown.length;
    palette.open = true;
    el.hidden = false;
    fitPalette();
    // The first command the filter starts is chosen ("/mem" is /memory, though /remember shows too).
    palette.active = filter && shown.length ? Math.max(0, shown.findIndex(starts)) : -1;
    markChosen();
  }
  // The list fits between the top of what is visible and the message box: on a phone the keyboard takes
  // the bottom of the screen (the visual viewport), and the list must not run off its top.
  function fitPalette() {
    const el = box(), composer = document.getElementById("composer");
    if (!el || el.hidden || !composer) return;
    const top = window.visualViewport ? window.visualViewport.offsetTop : 0;
    const room = composer.getBoundingClientRect().top - top - 16;
    el.style.maxHeight = Math.round(Math.max(120, Math.min(512, room))) + "px";
  }
  window.visualViewport?.addEventListener("resize", fitPalette);
  function closePalette() {
    if (!palette.open) return;
    palette.open = false;
    palette.active = -1;
    const el = box();
    if (el) el.hidden = true;
    const field = input();
    if (field?.getAttribute("aria-controls") === "slash-list") {
      field.removeAttribute("aria-controls");
      field.removeAttribute("aria-activedescendant");
    }
  }
  function markChosen() {
    const shown = shownOptions();
    document.querySelectorAll("#slash-list .slash-option").forEach((o) => o.setAttribute("aria-selected", "false"));
    const chosen = shown[palette.active];
    const field = input();
    field?.setAttribute("aria-autocomplete", "list");
    field?.setAttribute("aria-controls", "slash-list");
    if (chosen) {
      chosen.setAttribute("aria-selected", "true");
      chosen.scrollIntoView({ block: "nearest" });
      field?.setAttribute("aria-activedescendant", chosen.id);
    } else field?.removeAttribute("aria-activedescendant");
  }
  function follow() {
    const filter = slashFilter();
    if (filter === null) closePalette(); else showPalette(filter);
  }
  // Choosing: the command goes into the message box; `run` sends it when it needs nothing more.
  function choose(option, run) {
    const field = input();
    if (!option || !field) return;
    const needsMore = option.hasAttribute("data-argument");
    field.value = "/" + option.dataset.name + (needsMore ? " " : "");
    field.setSelectionRange(field.value.length, field.value.length);
    field.focus({ preventScroll: true });
    field.dispatchEvent(new Event("input", { bubbles: true }));  // the box's height, and the palette, follow
    if (run && !needsMore) { closePalette(); document.getElementById("composer")?.requestSubmit(); }
  }

  document.addEventListener("input", (e) => { if (e.target.id === "composer-input") follow(); });
  document.addEventListener("keyup", (e) => {
    if (e.target.id === "composer-input" && ["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) follow();
  });
  // Keys while the palette is open belong to it, before the composer's own (Enter sends, ↑ edits the
  // last message, Esc stops a reply).
  document.addEventListener("keydown", (e) => {
    if (!palette.open || e.target.id !== "composer-input" || e.isComposing) return;
    const shown = shownOptions();
    const n = shown.length;
    let handled = true;
    if (e.key === "Escape") closePalette();
    else if (e.key === "ArrowDown" && n) { palette.active = (palette.active + 1) % n; markChosen(); }
    else if (e.key === "ArrowUp" && n) { palette.active = palette.active < 0 ? n - 1 : (palette.active + n - 1) % n; markChosen(); }
    else if (e.key === "Tab" && !e.shiftKey && n) choose(shown[Math.max(palette.active, 0)], false);
    else if (e.key === "Enter" && !e.shiftKey && palette.active >= 0) choose(shown[palette.active], true);
    else if (e.key === "Enter" && !e.shiftKey && input().value === "/") { /* nothing chosen yet: a lone "/" is no message */ }
    else handled = false;
    if (handled) { e.preventDefault(); e.stopPropagation(); }
  }, true);
  // A tap or a click runs the command too; pressing an option leaves the focus (and a phone's keyboard) in the box.
  document.addEventListener("mousedown", (e) => { if (e.target.closest("#slash-list .slash-option")) e.preventDefault(); });
  document.addEventListener("click", (e) => {
    const option = e.target.closest("#slash-list .slash-option");
    if (option) { choose(option, true); return; }
    if (palette.open && !e.target.closest("#slash-palette, #composer-input")) closePalette();
  });
  document.addEventListener("submit", (e) => { if (e.target.id === "composer") closePalette(); }, true);
  // Focus leaving the box (Tab onwards) leaves the palette behind: it would hang over the chat.
  document.addEventListener("focusout", (e) => { if (e.target.id === "composer-input" && !box()?.contains(e.relatedTarget)) closePalette(); });

  // Reading comfort: text width and size, bubbles or a book page, names and times, and the scenery
  // (backgrounds, character art), kept per device in localStorage "sugo.reading". base.html applies
  // the same choices before the first paint; here they apply the moment one changes.
  const READING_KEY = "sugo.reading";
  function readReading() {
    try { return JSON.parse(localStorage.getItem(READING_KEY) || "{}") || {}; } catch { return {}; }
  }
  // Keep the rules in step with base.html's bootstrap: defaults set no attribute at all.
  function applyReading(r) {
    const d = document.documentElement;
    const set = (name, value) => { if (value === null) d.removeAttribute(name); else d.setAttribute(name, value); };
    set("data-reading-width", ["narrow", "wide"].includes(r.width) ? r.width : null);
    set("data-font-size", ["small", "large", "larger"].includes(r.size) ? r.size : null);
    set("data-layout", r.layout === "book" ? "book" : null);
    set("data-hide-names", r.names === false ? "" : null);
    set("data-hide-times", r.times === false ? "" : null);
    set("data-scenery", r.scenery === false ? "off" : null);
  }
  function fillReadingForm(form, r) {
    const pick = (name, value, fallback) => {
      const radio = form.querySelector(`input[name="${name}"][value="${value}"]`) || form.querySelector(`input[name="${name}"][value="${fallback}"]`);
      if (radio) radio.checked = true;
    };
    pick("width", r.width, "normal");
    pick("size", r.size, "normal");
    pick("layout", r.layout, "bubbles");
    for (const name of ["names", "times", "scenery"]) form.elements[name].checked = r[name] !== false;
  }
  document.addEventListener("change", (e) => {
    const form = e.target.closest?.("#reading-form");
    if (!form) return;
    const r = {
      width: form.elements.width.value, size: form.elements.size.value, layout: form.elements.layout.value,
      names: form.elements.names.checked, times: form.elements.times.checked, scenery: form.elements.scenery.checked,
    };
    try { localStorage.setItem(READING_KEY, JSON.stringify(r)); } catch { /* private mode: applied for this page only */ }
    // The newest message stays where the reader was: a wider or smaller text moves everything.
    const list = document.getElementById("message-list");
    const atEnd = list && list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    applyReading(r);
    if (atEnd) list.scrollTop = list.scrollHeight;
  });

  const readingPanel = () => document.getElementById("reading-panel");
  let readingOpener = null;  // the header's button or the More menu's item: focus goes back to it
  function openReading(opener) {
    const panel = readingPanel(), form = document.getElementById("reading-form");
    if (!panel || !form) return;
    if (opener.closest("#composer-menu")) {
      // Opened from the More menu, which then closes as it does after its other items.
      document.getElementById("composer-menu").hidden = true;
      document.getElementById("more-button")?.setAttribute("aria-expanded", "false");
      opener = document.getElementById("more-button") || opener;
    }
    readingOpener = opener;
    fillReadingForm(form, readReading());
    panel.hidden = false;
    document.getElementById("reading-button")?.setAttribute("aria-expanded", "true");
    // The first choice shown (on a phone the width's group is not).
    [...form.querySelectorAll("input:checked")].find((i) => i.getClientRects().length)?.focus({ preventScroll: true });
  }
  function closeReading(refocus) {
    const panel = readingPanel();
    if (!panel || panel.hidden) return false;
    panel.hidden = true;
    document.getElementById("reading-button")?.setAttribute("aria-expanded", "false");
    if (refocus) readingOpener?.focus();
    return true;
  }
  document.addEventListener("click", (e) => {
    const opener = e.target.closest("[data-open-reading]");
    if (opener) { if (readingPanel()?.hidden) openReading(opener); else closeReading(true); return; }
    if (e.target.closest("#reading-close")) { closeReading(true); return; }
    if (!e.target.closest("#reading-panel")) closeReading(false);
  });
  // Esc closes the panel (and only the panel: a reply being written goes on).
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && e.target.closest?.("#reading-panel") && closeReading(true)) { e.preventDefault(); e.stopPropagation(); }
  }, true);
})();

// ---- Character art (issue 29) ------------------------------------------------------------------
// The picture beside the story follows the replies: each assistant message carries the picture to show
// after it (`data-art`, worked out by the server: its speaker's art, or the expression of its words;
// "" for a speaker with none). Watching the list covers every way a reply arrives (a new one streaming
// from another group member, its final render, a swipe, a delete) without hooks in the stream code.
// While a reply streams as plain text its [expression: name] tag is kept out of sight too (the server's
// render, which replaces it at the end, never shows it).
(function () {
  "use strict";
  const TAG = /[ \t]*\[[ \t]*expression[ \t]*:[^\]\n]{0,40}\]/gi;
  const OPEN_TAG = /\[[ \t]*(e(x(p(r(e(s(s(i(o(n([ \t]*:[^\]\n]{0,40})?)?)?)?)?)?)?)?)?)?)?$/i;  // a tag still arriving
  function follow(list, figure) {
    const img = figure.querySelector("img");
    const streaming = list.querySelector(".msg.is-streaming .msg-text");
    if (streaming && !streaming.querySelector("*") && /\[/.test(streaming.textContent)) {
      const text = streaming.textContent;
      const shown = text.replace(TAG, "").replace(OPEN_TAG, "");
      if (shown !== text) streaming.textContent = shown;
    }
    const last = [...list.querySelectorAll("article.msg-assistant[data-art]")].pop();
    if (!last) return;
    const art = last.dataset.art;
    if (art && img.getAttribute("src") !== art) img.setAttribute("src", art);
    figure.hidden = !art;
  }
  document.addEventListener("DOMContentLoaded", () => {
    const list = document.getElementById("message-list");
    const figure = document.getElementById("character-art");
    if (!list || !figure) return;
    follow(list, figure);
    new MutationObserver(() => follow(list, figure)).observe(list, { childList: true, subtree: true, characterData: true });
  });
})();
// Backgrounds (issue 29): an upload in Chat Settings answers with the Background section again; what it
// says (the refusal, or the picture added) is brought into view, clear of the panel's sticky Save bar.
document.addEventListener("htmx:load", (e) => {
  const section = e.detail.elt;
  if (!(section instanceof Element) || section.id !== "background-section") return;
  const status = section.querySelector("#background-status");
  if (status && status.textContent.trim()) status.scrollIntoView({ block: "center", behavior: "instant" });
});

/* Dialogue (issue 29): picking a speech colour means it should count, so "Automatic" beside it unticks. */
document.addEventListener("input", (event) => {
  const picker = event.target;
  if (!(picker instanceof HTMLInputElement) || picker.type !== "color" || !picker.closest(".speech-colour")) return;
  const auto = picker.closest(".speech-colour").querySelector('input[name="colour_auto"]');
  if (auto) auto.checked = false;
});

/* Dialogue (issue 29): Chat Settings can change who speaks (the persona, a narrator joining), so the
   chat's speech colours are asked for again; an address the server does not know as current is answered
   fresh and not kept (app/chats/routes.py show_speakers_css). */
document.addEventListener("sugo:settings-saved", () => {
  const link = document.getElementById("speakers-css");
  if (link) link.href = link.href.replace(/([?&]v=)[^&]*/, "$1" + Date.now().toString(36));
});
