/// Where the decode queue puts each new newest picture, live or caught up: the viewers (long
/// polls and MJPEG viewers are woken), the encoded-picture cache (which drops what no one can
/// ask for any more), the first picture's event, and `published` (requests waiting for an
/// on-demand connection's first picture).
struct NewestPicture: Sendable {
    let viewers: ViewerSet
    let pictures: PictureCache
    let context: SessionContext
    let published: @Sendable (PublishedFrame) -> Void

    /// Makes `newest` the session's newest picture, if it is newer (on the decode queue: only
    /// this queue publishes, so the newest cannot change between these calls).
    func publish(_ newest: PublishedFrame) {
        let previous = viewers.newest?.sequence
        guard newest.sequence > previous ?? 0 else { return }
        pictures.newestChanged(previous: previous, newest: newest.sequence)
        viewers.publish(newest)
        published(newest)
        if previous == nil {
            let info = newest.info(now: context.clock.uptime)
            context.events.emit(.pictureFirst) { details in
                details.seq = info.seq
                details.width = info.width
                details.height = info.height
            }
        }
    }
}
