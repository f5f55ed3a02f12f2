from fastapi import APIRouter, Response

from app.images import service
from app.web.deps import SessionDep

router = APIRouter()


@router.get("/images/{image_id}", include_in_schema=False)
def show_image(image_id: int, session: SessionDep) -> Response:
    """Serve an avatar; images never change once stored, so browsers may cache them for good."""
    image = service.get_image(session, image_id)
    return Response(
        image.data,
        media_type=image.mime,
        headers={
            "Cache-Control": "private, max-age=31536000, immutable",
            "X-Content-Type-Options": "nosniff",
        },
    )
