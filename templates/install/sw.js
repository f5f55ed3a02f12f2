// Sugo's service worker: the app shell from its cache, and a friendly page when the server cannot
// be reached. Pages, API answers, images and anything sent (POST) always go to the server and are
// never stored: they are the user's chats and change with every message.
"use strict";
const CACHE = "sugo-shell-{{ version }}";
const SHELL = {{ shell|tojson }};
const OFFLINE = {{ offline|tojson }};

self.addEventListener("install", (event) => {
  // cache: "reload" skips the browser's HTTP cache, which may still hold the last release's files.
  event.waitUntil(
    caches.open(CACHE)
      .then((cache) => cache.addAll(SHELL.map((url) => new Request(url, { cache: "reload" }))))
      .then(() => self.skipWaiting())
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith("sugo-") && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim())
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (request.mode === "navigate") {
    // Network first, and nothing kept: when the server is out of reach, the offline page.
    event.respondWith(fetch(request).catch(() => caches.match(OFFLINE)));
    return;
  }
  if (SHELL.includes(url.pathname) && !url.search) {
    event.respondWith(caches.match(request).then((hit) => hit || fetch(request)));
  }
  // Everything else (API, images, fragments) is left to the browser: straight to the server.
});
